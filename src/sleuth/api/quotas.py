"""Per-user limits of the HTTP API: a request rate, runs at once, bytes of uploads kept.

The rate is a moving window kept in memory by the ``limits`` library (one window per user
and process): ``SLEUTH_API_USER_RATE`` (e.g. ``120/minute``). A request beyond it answers
``429`` with ``Retry-After`` (seconds until the window frees a slot) and a JSON body naming
the limit. Runs at once (``SLEUTH_API_USER_MAX_RUNS``) and the upload quota
(``SLEUTH_UPLOAD_QUOTA_BYTES``) are checked where runs and uploads are accepted.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from fastapi import HTTPException
from limits import parse, storage, strategies

from sleuth.config import Settings


class UserLimits:
    """The per-user limits of one API process.

    Args:
        settings: ``api_user_rate``, ``api_user_max_runs`` and ``upload_quota_bytes``.
    """

    def __init__(self, settings: Settings) -> None:
        self.rate_text = settings.api_user_rate
        self.rate = parse(settings.api_user_rate)
        self.max_runs = settings.api_user_max_runs
        self.upload_quota = settings.upload_quota_bytes
        self._limiter = strategies.MovingWindowRateLimiter(storage.MemoryStorage())

    def check_rate(self, user_id: str) -> None:
        """Count one request of the user.

        Raises:
            HTTPException: 429 with ``Retry-After`` once the user's rate is spent.
        """
        if self._limiter.hit(self.rate, user_id):
            return
        reset = self._limiter.get_window_stats(self.rate, user_id).reset_time
        wait = max(1, math.ceil(reset - time.time()))
        raise HTTPException(
            429,
            f"rate limit reached: at most {self.rate_text} requests per user "
            f"(SLEUTH_API_USER_RATE); retry in {wait} s",
            {"Retry-After": str(wait)},
        )

    def check_runs(self, running: int) -> None:
        """Refuse a new run when the user already has ``max_runs`` running or waiting.

        Raises:
            HTTPException: 429 with ``Retry-After``.
        """
        if running >= self.max_runs:
            raise HTTPException(
                429,
                f"{running} of your runs are running or waiting, the most one user may have "
                f"at once (SLEUTH_API_USER_MAX_RUNS={self.max_runs}); retry when one has ended",
                {"Retry-After": "5"},
            )

    def check_upload(self, folders: list[Path], incoming: int, waiting: int = 0) -> None:
        """Refuse an upload that would take the user's kept uploads (the files under
        ``folders``, plus ``waiting`` bytes of earlier uploads not yet ingested) past the
        quota.

        Raises:
            HTTPException: 413 naming the quota and what is used.
        """
        used = (
            sum(
                p.stat().st_size
                for folder in folders
                if folder.is_dir()
                for p in folder.rglob("*")
                if p.is_file()
            )
            + waiting
        )
        if used + incoming > self.upload_quota:
            raise HTTPException(
                413,
                f"this upload ({incoming} bytes) would take your stored uploads ({used} bytes) "
                f"past your quota of {self.upload_quota} bytes (SLEUTH_UPLOAD_QUOTA_BYTES); "
                "delete documents first",
            )
