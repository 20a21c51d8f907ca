"""The ``sleuth`` command line.

Exit codes: 0 answered (or command succeeded), 1 error, 2 usage error, 3 insufficient context.
Commands parse options and hand off to the library; sleuth's own errors become a one-line
message on stderr and exit code 1, never a traceback.

One module per command group (``ingest``, ``search``, ``ask``, ``collections`` with
``delete``, ``demo``, ``serve`` with ``mcp``, ``users``, ``eval``, ``config``,
``migrate``); this one
holds the Typer app, registers the commands and is the console-script entry point
(:func:`main`). The command modules import only Typer, rich and sleuth's settings at the
top: each command imports what it needs (the embedding model, the agent, LangChain, the
HTTP server) inside its function, when it runs, so that ``sleuth --help``,
``sleuth collections`` or ``sleuth config`` start in a fraction of a second.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Annotated

import typer

from sleuth.cli._common import (
    EXIT_ERROR,
    EXIT_INSUFFICIENT,
    EXIT_OK,
    EXIT_USAGE,
    err,
    error_line,
)
from sleuth.cli.ask import ask
from sleuth.cli.chat import chat
from sleuth.cli.collections import collections, delete
from sleuth.cli.config import show_config
from sleuth.cli.demo import DEMO_COLLECTION, DEMO_QUESTION, demo
from sleuth.cli.eval import eval_app
from sleuth.cli.ingest import ingest
from sleuth.cli.migrate import migrate
from sleuth.cli.search import read, search
from sleuth.cli.serve import LOOPBACK_HOSTS, mcp_server, serve
from sleuth.cli.users import users_app
from sleuth.errors import SleuthError

__all__ = [
    "DEMO_COLLECTION",
    "DEMO_QUESTION",
    "EXIT_ERROR",
    "EXIT_INSUFFICIENT",
    "EXIT_OK",
    "EXIT_USAGE",
    "LOOPBACK_HOSTS",
    "app",
    "main",
]

app = typer.Typer(
    name="sleuth",
    help="sleuth — an agentic RAG engine: it searches, reads, follows references and answers "
    "with checked citations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# in the order of `sleuth --help` before the split into modules
app.command()(ingest)
app.command()(search)
app.command()(read)
app.command()(ask)
app.command()(chat)
app.command()(delete)
app.command()(collections)
app.command()(demo)
app.command()(serve)
app.add_typer(users_app, name="users")
app.command("mcp")(mcp_server)
app.add_typer(eval_app, name="eval")
app.command("config")(show_config)
app.command()(migrate)


def _version(value: bool) -> None:
    if value:
        from sleuth import __version__

        typer.echo(f"sleuth {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    return None


def main() -> None:
    """Console-script entry point: no traceback reaches the user unless SLEUTH_DEBUG=1."""
    try:
        app()
    except SleuthError as exc:
        error_line(str(exc))
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("SLEUTH_DEBUG", "").strip() not in ("", "0", "false", "no"):
            traceback.print_exc()
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        error_line(f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": "))
        err.print("(set SLEUTH_DEBUG=1 for the traceback)", highlight=False, soft_wrap=True)
        sys.exit(EXIT_ERROR)
