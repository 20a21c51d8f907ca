"""``sleuth serve`` (the HTTP API) and ``sleuth mcp`` (the MCP server)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated

import typer

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_USAGE, CollectionOpt, err
from sleuth.errors import SleuthError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default: SLEUTH_API_HOST, 127.0.0.1)")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="TCP port (default: SLEUTH_API_PORT, 8000)"),
    ] = None,
    log_level: Annotated[
        str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug")
    ] = "info",
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs); needs the 'api' extra."""
    from sleuth.errors import require

    try:
        for module in ("fastapi", "uvicorn", "sse_starlette", "python_multipart"):
            require(module, "api", "sleuth serve (the HTTP API)")
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    if log_level not in LOG_LEVELS:
        raise common.fail(
            f"--log-level must be critical, error, warning, info or debug, not '{log_level}'",
            EXIT_USAGE,
        )
    settings = common.load_settings()
    host = host or settings.api_host
    port = port or settings.api_port
    import uvicorn

    from sleuth.api import create_app

    try:
        application = create_app(settings)
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    if host not in LOOPBACK_HOSTS:
        common.warning_line(
            f"binding {host}: the API is reachable from other machines (every request still "
            "needs an API key)"
        )
    err.print(f"sleuth API on http://{host}:{port} (docs: /docs); Ctrl-C stops it")
    grace = settings.api_shutdown_grace_s
    # uvicorn handles SIGTERM/SIGINT (stop accepting, let work finish within the grace),
    # then raises the signal again for the previous handler: a graceful stop exits 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    uvicorn.run(
        application,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=max(1, round(grace)),
    )
    # work that outlived the grace is recorded (runs interrupted, jobs to resume): a thread
    # still waiting on a model must not keep the process alive
    if not application.state.sleuth.settled:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def mcp_server(
    transport: Annotated[
        str, typer.Option(help="stdio (for a client that starts it) | http (streamable HTTP)")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="http: address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="http: TCP port")] = 8765,
    user: Annotated[
        str | None,
        typer.Option(
            help="stdio or --no-auth: user (name) the requests run as: their collections and "
            "memory (default: SLEUTH_MCP_USER; none: every collection, like the CLI)"
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="http: serve without API keys, every request as --user (local, single user)",
        ),
    ] = False,
    collection: CollectionOpt = None,
) -> None:
    """Serve rag_search, read_section, list_collections and ask as MCP tools; needs the
    'mcp' extra. Over http every request needs an API key (Authorization: Bearer) and runs as
    its user, unless --no-auth."""
    if transport not in ("stdio", "http"):
        raise common.fail(f"--transport must be stdio or http, not '{transport}'", EXIT_USAGE)
    keys = transport == "http" and not no_auth
    if keys and user is not None:
        raise common.fail(
            "--user applies to stdio or --no-auth: over http each request's API key names its user",
            EXIT_USAGE,
        )
    name = common.collection_name(collection) if collection is not None else None
    s = common.open_sleuth()
    try:
        from sleuth.mcp.server import serve as serve_mcp

        serve_mcp(
            s,
            transport,  # type: ignore[arg-type]
            host=host,
            port=port,
            # SLEUTH_MCP_USER is a default for keyless serving: keys name their own users
            user=None if keys else user or s.settings.mcp_user,
            collection=name,
            auth=not no_auth,
        )
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
