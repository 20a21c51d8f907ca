"""Shared unit-test setup: no real models, no user home, no user LLM settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.llm import testing


@pytest.fixture(autouse=True)
def _isolate_unit_test(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Block real model requests and point sleuth's data dir at a fresh temporary dir."""
    monkeypatch.setattr(testing, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.setenv("SLEUTH_DATA_DIR", str(tmp_path / "sleuth-data"))
    # the cross-encoder is a real model: unit tests that need it turn it on themselves
    monkeypatch.setenv("SLEUTH_RERANK", "off")
    monkeypatch.setenv("SLEUTH_CROSS_ENCODER", "false")
    for name in ("SLEUTH_LLM", "SLEUTH_LLM_BASE_URL", "SLEUTH_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    yield
