"""What the API's handlers share: the installation, the run and job registries.

One :class:`ApiState` per application (``app.state.sleuth``); :func:`get_state` is the
dependency that hands it to a handler.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import HTTPException, Request

from sleuth.api.jobs import JobRegistry
from sleuth.api.quotas import UserLimits
from sleuth.api.runs import RunRegistry
from sleuth.app import Sleuth
from sleuth.store.catalog import CollectionInfo, UserInfo


@dataclass
class ApiState:
    """The installation behind the API and its background work."""

    sleuth: Sleuth
    runs: RunRegistry
    jobs: JobRegistry
    limits: UserLimits
    owns_sleuth: bool = True
    settled: bool = True
    """False once a shutdown left work running past its grace (``sleuth serve`` then exits
    at once instead of waiting for those threads)."""

    def collection_of(self, user: UserInfo, name: str) -> CollectionInfo:
        """The user's collection ``name``.

        Raises:
            HTTPException: 404 when it does not exist or belongs to someone else (the two
                are not told apart: another user's collection names stay private).
        """
        catalog = self.sleuth.catalog
        info = catalog.get_collection(name) if catalog.collection_owner(name) == user.id else None
        if info is None:
            raise HTTPException(404, f"collection '{name}' not found")
        return info

    def close(self, grace_s: float | None = None) -> bool:
        """Stop the background work — waiting for it, or at most ``grace_s`` seconds in all (see
        :meth:`RunRegistry.shutdown`, :meth:`JobRegistry.shutdown`) — then close the
        installation (if the API opened it). Returns whether all work ended in time."""
        deadline = None if grace_s is None else time.monotonic() + grace_s
        self.jobs.stop()  # the running job heads for its safe point while the runs finish
        left = self.runs.shutdown(grace_s)
        # one grace for both: the job gets what the runs left of it
        rest = None if deadline is None else max(0.0, deadline - time.monotonic())
        settled = self.jobs.shutdown(rest)
        if self.owns_sleuth and settled and not left:
            self.sleuth.close()
        return settled and not left


def get_state(request: Request) -> ApiState:
    """The application's :class:`ApiState` (a FastAPI dependency)."""
    return request.app.state.sleuth
