"""Prompt templates, kept as package data."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    return files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")
