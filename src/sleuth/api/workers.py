"""Which process holds a job or a run: worker names and the test for a worker that is gone.

A worker name is ``host:pid:nonce``. The catalog records it with each ingestion job and
each agent run in flight, so that at start a process can tell the work a killed process
left behind (its pid no longer runs on this host, or it has been silent too long) from the
work of a process that is still alive — on one host or on several sharing a PostgreSQL
catalog.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import UTC, datetime


def worker_name() -> str:
    """A new name for this process's worker: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def is_gone(worker: str | None, heartbeat: datetime | None, stale_after_s: float, me: str) -> bool:
    """Whether ``worker`` (not ``me``) no longer runs: none recorded; a process of this host
    whose pid is gone, or that is this process under an older name (a restart that got the
    same pid); or silent (``heartbeat``, UTC) for more than ``stale_after_s`` seconds."""
    if worker == me:
        return False
    if not worker:
        return True
    host, _, rest = worker.partition(":")
    pid = rest.partition(":")[0]
    here = host == socket.gethostname() and pid.isdigit()
    if here and (int(pid) == os.getpid() or not _pid_alive(int(pid))):
        return True
    if heartbeat is None:
        return True
    return (datetime.now(UTC) - heartbeat).total_seconds() > stale_after_s
