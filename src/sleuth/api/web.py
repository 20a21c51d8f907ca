"""The web app at ``/``: the built static files of :mod:`sleuth.web` (no CDN, nothing fetched
from elsewhere at run time). Mounted after the API's routes, so they take precedence."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from sleuth.web import STATIC_DIR

_MISSING = """<!doctype html><html lang="en"><meta charset="utf-8"><title>sleuth</title>
<body><h1>sleuth</h1><p>The web app is not built. Build it with
<code>npm ci --prefix web &amp;&amp; npm --prefix web run build</code>, or use the API
(<a href="/docs">/docs</a>).</p></body></html>"""


def mount_web(app: FastAPI, static_dir: Path = STATIC_DIR) -> None:
    """Serve ``static_dir/index.html`` at ``/`` and its ``assets/`` at ``/assets``."""
    index = static_dir / "index.html"
    headers = {"Cache-Control": "no-cache"}

    @app.get("/", include_in_schema=False, response_model=None)
    async def web_index() -> FileResponse | HTMLResponse:
        if not index.is_file():
            return HTMLResponse(_MISSING, status_code=503)
        return FileResponse(index, media_type="text/html", headers=headers)

    assets = static_dir / "assets"
    if assets.is_dir():
        app.mount("/assets", StaticFiles(directory=assets), name="web-assets")
