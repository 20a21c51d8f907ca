"""Say so while a model request waits to be retried (429 ``Retry-After``, 5xx, timeouts).

The OpenAI SDK (used by the ``openai`` provider through ``langchain-openai``) retries
rate-limited and failed requests itself, honouring ``Retry-After``, and logs each wait on the
``openai._base_client`` logger ("Retrying request in 30.000000 seconds (retry 1 of 2)"). A
30-second wait is otherwise silent: :func:`retry_notices` turns those records into a line
for the run's trace (the CLI and the SSE stream show it as an observation) for as long as it
is active in the current context. The SDK keeps doing the retrying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sleuth.llm import calls

SDK_LOGGER = "openai._base_client"
_RETRY_PREFIX = "Retrying request in"
_notify: ContextVar[Callable[[str], None] | None] = ContextVar("sleuth_retry_notify", default=None)
_installed: list[bool] = []


def describe(seconds: float, attempt: int, attempts: object) -> str:
    """The status line for a wait: "The model request did not go through (a rate limit, a
    busy server or a timeout): retrying in 30 s (retry 1 of 2)."."""
    wait = f"{seconds:.0f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"
    return (
        "The model request did not go through (a rate limit, a busy server or a timeout): "
        f"retrying in {wait} (retry {attempt} of {attempts})."
    )


class _RetryFilter(logging.Filter):
    """Reports the SDK's retry records to the active run; keeps them out of the log unless
    the logger was already enabled for INFO before this filter lowered its level."""

    def __init__(self, shown: bool) -> None:
        super().__init__()
        self.shown = shown

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_RETRY_PREFIX):
            return True
        notify = _notify.get()
        limits = calls.current()
        if limits is not None and limits.cut:
            # a request the run already gave up at its deadline (its thread lives on): its
            # retries are not the run's
            notify = None
        if notify is not None:
            try:
                seconds, attempt, attempts = record.args  # type: ignore[misc]
                notify(describe(float(seconds), int(attempt), attempts))
            except Exception:  # a changed SDK message must not break a request
                pass
        return self.shown


def _install() -> None:
    if _installed:
        return
    logger = logging.getLogger(SDK_LOGGER)
    shown = logger.isEnabledFor(logging.INFO)
    if not shown:
        logger.setLevel(logging.INFO)
    logger.addFilter(_RetryFilter(shown))
    _installed.append(True)


@contextmanager
def retry_notices(notify: Callable[[str], None]) -> Iterator[None]:
    """Within the block, each retry wait of a model request made in this context (thread or
    task) is reported as ``notify(line)``."""
    _install()
    token = _notify.set(notify)
    try:
        yield
    finally:
        _notify.reset(token)
