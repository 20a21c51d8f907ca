"""What every command shares: exit codes, option types, the error line, settings, the app.

Kept light on purpose (Typer, rich and sleuth's config only): every ``sleuth`` command
imports this module, and the heavy parts (the embedding model, the agent, LangChain) are
imported inside the commands that need them, when they run.

Tests replace :func:`open_sleuth` (``monkeypatch.setattr(sleuth.cli._common, "open_sleuth",
...)``); the commands call it through this module so that the replacement is seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from sleuth.config import Settings, validation_messages
from sleuth.types import question_problem

if TYPE_CHECKING:
    from sleuth.app import Sleuth

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INSUFFICIENT = 3

err = Console(stderr=True, highlight=False)
"""Messages, warnings and progress go to stderr; results and the live trace (the
TraceRenderer) to stdout."""

CollectionOpt = Annotated[
    str | None,
    typer.Option("--collection", "-c", help="Collection name (default: SLEUTH_DEFAULT_COLLECTION)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout")]
AsciiOpt = Annotated[bool, typer.Option("--ascii", help="ASCII-only output")]


def error_line(message: str) -> None:
    """``error: <message>`` on stderr, on one line (no markup, no wrapping)."""
    err.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True, highlight=False)


def warning_line(message: str) -> None:
    """``warning: <message>`` on stderr, on one line (no markup, no wrapping)."""
    err.print(Text.assemble(("warning:", "yellow"), " ", message), soft_wrap=True)


def info_line(message: str) -> None:
    """``message`` on stderr, on one line (no markup, no wrapping)."""
    err.print(Text(message), soft_wrap=True, highlight=False)


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print the error line and return the exit to raise: ``raise fail("...")``."""
    error_line(message)
    return typer.Exit(code)


def load_settings() -> Settings:
    """The settings in force; invalid ones end the command with one line per bad field."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as exc:
        for line in validation_messages(exc).values():
            error_line(line)
        raise typer.Exit(EXIT_ERROR) from exc


def open_sleuth() -> Sleuth:
    """A :class:`~sleuth.app.Sleuth` over the settings in force (its parts open lazily)."""
    from sleuth.app import Sleuth

    return Sleuth(load_settings())


def collection_name(name: str | None) -> str:
    """The collection to use (``-c`` or the default), checked before anything is opened.

    Raises:
        typer.Exit: an invalid name (2 when given with ``-c``, 1 when it is the default).
    """
    from sleuth.errors import UserError
    from sleuth.store.catalog import validate_collection_name

    chosen = load_settings().default_collection if name is None else name
    try:
        return validate_collection_name(chosen)
    except UserError as exc:
        raise fail(str(exc), EXIT_USAGE if name is not None else EXIT_ERROR) from exc


def non_empty(text: str, what: str) -> str:
    """``text`` unchanged; a usage error when it is blank."""
    if not text.strip():
        raise fail(f"the {what} is empty; give a non-empty {what}", EXIT_USAGE)
    return text


def runnable_question(question: str) -> str:
    """``question`` unchanged; a usage error when a run would refuse it
    (:func:`~sleuth.types.question_problem`: blank, too long, or without a letter or digit)."""
    non_empty(question, "question")
    problem = question_problem(question)
    if problem is not None:
        raise fail(problem, EXIT_USAGE)
    return question


def stdout_console() -> Console:
    """A console for tables on stdout (no highlighting of numbers and paths)."""
    return Console(highlight=False)
