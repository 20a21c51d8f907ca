"""Freed memory handed back to the operating system in a long-running server.

A run or an ingestion job allocates and frees tens of MB (section texts, the trace, embedding
batches) from many worker threads. glibc's ``malloc`` keeps what is freed for reuse, per
arena, and returns little of it to the OS unless asked, so a server's resident set creeps up
under load although its live data does not. :func:`trim` asks, with glibc's
``malloc_trim(0)`` (``man 3 malloc_trim``: every arena's free pages are released with
``madvise(MADV_DONTNEED)``), at most once per :data:`TRIM_EVERY_S`; and
:func:`limit_arenas` caps glibc's arenas (``mallopt(M_ARENA_MAX)``, the knob of the
``MALLOC_ARENA_MAX`` variable: by default up to 8 per core, each keeping its own free memory,
while Python threads take turns under the GIL anyway). Elsewhere (musl, macOS, Windows)
there are no such calls and both do nothing.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

TRIM_EVERY_S = 10.0
"""Seconds between two trims at least: a trim walks the heap while holding each arena's
lock (a few ms for a server of some hundred MB)."""


MAX_ARENAS = 2
_M_ARENA_MAX = -8  # from glibc's malloc.h


def limit_arenas(n: int = MAX_ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``n`` for this process (call it before the worker
    threads start: arenas already made stay); True when the cap was set. An explicit
    ``MALLOC_ARENA_MAX`` in the environment wins (nothing is changed)."""
    import os

    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, n))


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` of this process, or ``None`` where there is none."""
    try:
        libc = ctypes.CDLL(None)
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


class HeapTrimmer:
    """Rate-limited ``malloc_trim(0)``; thread-safe.

    Args:
        every_s: seconds between two trims at least.
        clock: monotonic seconds (a test passes its own).
        trim_fn: the trim call (default: glibc's; ``None`` where there is none).
    """

    def __init__(
        self,
        every_s: float = TRIM_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        trim_fn: Callable[[int], int] | None = None,
    ) -> None:
        self.every_s = every_s
        self._clock = clock
        self._trim = trim_fn if trim_fn is not None else _malloc_trim()
        self._last: float | None = None
        self._lock = threading.Lock()
        self.trims = 0

    @property
    def available(self) -> bool:
        """Whether this platform has a trim call."""
        return self._trim is not None

    def trim(self) -> bool:
        """Trim unless the last trim was under ``every_s`` ago; True when it trimmed."""
        if self._trim is None:
            return False
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < self.every_s:
                return False
            self._last = now
        try:
            self._trim(0)
        except OSError as exc:  # pragma: no cover - the call itself does not fail on glibc
            logger.debug("malloc_trim failed: %s", exc)
            return False
        self.trims += 1
        return True


_default = HeapTrimmer()


def trim() -> bool:
    """The process's :class:`HeapTrimmer`: trim at most once per :data:`TRIM_EVERY_S`."""
    return _default.trim()
