"""The web reasoning panel: the built single-page app (``static/``), served by ``sleuth serve``.

The sources live in ``web/`` at the repository root (React + TypeScript + Vite); ``npm --prefix
web run build`` writes the build here, with ``static/build.json`` recording a hash of the
sources it was built from (a test checks that the shipped build is up to date).
"""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
"""The built app: ``index.html``, ``assets/``, ``build.json``."""
