"""``sleuth config``: the settings in force, secrets masked, invalid values marked."""

from __future__ import annotations

import typer

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_ERROR


def show_config() -> None:
    """Print the settings in force (secrets masked); invalid values are marked."""
    from sleuth.config import inspect_settings

    values, problems = inspect_settings()
    for key, value in values.items():
        mark = "    # INVALID" if key in problems else ""
        typer.echo(f"SLEUTH_{key.upper()}={value}{mark}")
    for line in problems.values():
        common.error_line(line)
    if problems:
        raise typer.Exit(EXIT_ERROR)
