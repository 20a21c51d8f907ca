"""Freed memory handed back to the OS by a long-running server (:mod:`sleuth.api.heap`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sleuth.api import heap
from sleuth.api.heap import HeapTrimmer, _malloc_trim


def test_trims_at_most_once_per_interval() -> None:
    now = [100.0]
    calls: list[int] = []
    trimmer = HeapTrimmer(
        every_s=10.0, clock=lambda: now[0], trim_fn=lambda pad: calls.append(pad) or 1
    )
    assert trimmer.trim() is True
    now[0] += 3.0
    assert trimmer.trim() is False  # too soon
    now[0] += 7.5
    assert trimmer.trim() is True
    assert calls == [0, 0] and trimmer.trims == 2


def test_without_a_trim_call_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)  # musl, macOS: no malloc_trim
    trimmer = HeapTrimmer()
    assert not trimmer.available and trimmer.trim() is False


@pytest.mark.skipif(_malloc_trim() is None, reason="not glibc")
def test_a_real_trim_returns_freed_memory() -> None:
    # a child allocates and frees 200 MB in small blocks (kept by malloc), then trims:
    # its resident set falls by most of it (here 205 MB -> 17 MB; without the trim, none)
    code = """
from sleuth.api.heap import HeapTrimmer

def rss_mb():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * 4096 / 2**20

blocks = [bytearray(2000) for _ in range(100_000)]
keep = blocks[::1000]  # a few live blocks scattered over the heap
del blocks
before = rss_mb()
assert HeapTrimmer(every_s=0).trim()
after = rss_mb()
print(f"{before:.0f} {after:.0f}")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    before, after = map(float, out.stdout.split())
    assert before - after > 100, out.stdout
