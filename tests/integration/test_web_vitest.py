"""The web app's component tests (Vitest), run through npm.

Needs ``npm ci --prefix web`` first (Node 20+). Skipped when ``web/node_modules`` is missing,
unless ``SLEUTH_WEB_TESTS=1``, which makes a missing setup a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WEB = Path(__file__).resolve().parents[2] / "web"
REQUIRED = os.environ.get("SLEUTH_WEB_TESTS") == "1"


def test_vitest_component_tests_pass() -> None:
    npm = shutil.which("npm")
    missing = (
        "npm is not installed"
        if npm is None
        else "web/node_modules is missing (run `npm ci --prefix web`)"
        if not (WEB / "node_modules").is_dir()
        else None
    )
    if missing:
        if REQUIRED:
            pytest.fail(f"SLEUTH_WEB_TESTS=1 but {missing}")
        pytest.skip(missing)
    assert npm is not None
    proc = subprocess.run(
        [npm, "test", "--prefix", str(WEB)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CI": "1", "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, f"vitest failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
