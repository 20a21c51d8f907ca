"""The web app at ``/`` and the API's Swagger UI at ``/docs``, both served from installed
files (no CDN, nothing fetched from elsewhere at run time): the built static files of
:mod:`sleuth.web`, and Swagger UI's from the ``swagger-ui-bundle`` package. Mounted after the
API's routes, so they take precedence."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from sleuth.web import STATIC_DIR

_MISSING = """<!doctype html><html lang="en"><meta charset="utf-8"><title>sleuth</title>
<body><h1>sleuth</h1><p>The web app is not built. Build it with
<code>npm ci --prefix web &amp;&amp; npm --prefix web run build</code>, or use the API
(<a href="/docs">/docs</a>).</p></body></html>"""


DOCS_ASSETS = "/docs/assets"


def mount_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs`` over the app's OpenAPI schema, its script and stylesheet
    served from :data:`DOCS_ASSETS` (the app must be built with ``docs_url=None``)."""
    from swagger_ui_bundle import swagger_ui_path

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} — API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")


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
