"""Live rendering of run events in the terminal (the ``sleuth ask`` trace).

Unicode by default; ``ascii_only`` renders with plain ASCII markers (``[OK]``, ``->``) for
terminals that cannot print Unicode.
"""

from __future__ import annotations

import json
from typing import Any

from anyascii import anyascii
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from sleuth.agents.answer import GeneratedAnswer
from sleuth.agents.events import AgentEvent

PREVIEW_CHARS = 240


def _args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())


class TraceRenderer:
    """An event sink that prints each step of a run as it happens.

    Args:
        console: where to print (stdout by default).
        ascii_only: only ASCII characters in the output.
        show_observe: also print OBSERVE steps (summaries of what the agent saw).
    """

    def __init__(
        self, console: Console | None = None, ascii_only: bool = False, show_observe: bool = True
    ) -> None:
        self.ascii = ascii_only
        self.console = console or Console(emoji=not ascii_only, highlight=False)
        self.show_observe = show_observe
        self._streaming = 0  # the answer stream being printed (0: none)
        self.m = (
            {"think": "[think]", "call": "  ->", "ok": "  <- [OK]", "fail": "  <- [FAIL]",
             "obs": "[observe]", "cite": "-"}
            if ascii_only
            else {"think": "💭", "call": "  →", "ok": "  ←  ✓", "fail": "  ←  ✗",
                  "obs": "👁 ", "cite": "•"}
        )  # fmt: skip
        # the markers as Rich markup: "[think]" is text there, not a style tag
        self.markup = {k: escape(v) for k, v in self.m.items()}

    def _text(self, text: str) -> str:
        """``text``, transliterated to ASCII with ``--ascii`` (’ → ', — → -, ā → a)."""
        return anyascii(text) if self.ascii else text

    def _print(self, markup: str) -> None:
        self.console.print(self._text(markup), soft_wrap=False)

    def __call__(self, event: AgentEvent) -> None:
        m = self.markup
        if event.type == "answer_delta":
            self._delta(event.delta, event.stream)
            return
        if self._streaming:  # the streamed text ends where any other event begins
            self.console.file.write("\n")
            self.console.file.flush()
            self._streaming = 0
        if event.type == "observe" and self.show_observe:
            self._print(f"[dim]{m['obs']} {escape(event.content)}[/dim]")
        elif event.type == "think":
            self._print(f"[bold cyan]{m['think']} {escape(event.content)}[/bold cyan]")
        elif event.type == "tool_call":
            self._print(f"[yellow]{m['call']} {event.tool}({escape(_args(event.arguments))})[/]")
        elif event.type == "tool_result":
            mark = m["ok"] if event.ok else m["fail"]
            style = "green" if event.ok else "red"
            self._print(
                f"[{style}]{mark} {escape(event.status)}[/] [dim]({event.duration_ms:.0f} ms)[/]"
            )
            preview = event.preview[:PREVIEW_CHARS]
            if preview and event.ok:
                self._print(f"[dim]     {escape(preview)}[/dim]")
        elif event.type == "answer":
            if event.revised:
                self._print(
                    "[yellow]The checked answer below differs from the text streamed above: "
                    "it is the one to use.[/yellow]"
                )
            self.render_answer(event.answer, event.status)
        elif event.type == "done":
            self._print(f"[dim]status: {event.status}[/dim]")
        elif event.type == "error":
            self._print(f"[bold red]error: {escape(event.message)}[/bold red]")

    def _delta(self, text: str, stream: int) -> None:
        """Print a piece of the answer as the model writes it, raw and unbuffered (a new
        stream starts on a new, labelled line)."""
        out = self.console.file
        if stream != self._streaming:
            out.write(
                ("\n" if self._streaming else "")
                + self._text("[writing] " if self.ascii else "✍  ")
            )
            self._streaming = stream
        out.write(self._text(text))
        out.flush()

    def render_answer(self, answer: GeneratedAnswer, status: str) -> None:
        if status == "error":
            title = "Run failed" + ("" if answer.is_insufficient_context else ": partial answer")
        else:
            title = "Insufficient context" if answer.is_insufficient_context else "Answer"
        body = Text(self._text(answer.answer_text))
        if answer.citations:
            body.append("\n\nCitations:\n", style="bold")
            for c in answer.citations:
                number = f"[{c.number}] " if c.number is not None else ""
                body.append(self._text(f" {self.m['cite']} {number}{c.source_id}  {c.title}\n"))
        if answer.ungrounded_sentences:
            body.append("\nNot supported by a cited section:\n", style="bold yellow")
            for sentence in answer.ungrounded_sentences:
                body.append(self._text(f" - {sentence}\n"), style="yellow")
        box_style = "yellow" if answer.is_insufficient_context else "green"
        if self.ascii:
            from rich import box

            self.console.print(Panel(body, title=title, border_style=box_style, box=box.ASCII))
        else:
            self.console.print(Panel(body, title=title, border_style=box_style))
