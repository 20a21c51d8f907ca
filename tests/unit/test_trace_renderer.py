"""The CLI's live trace: every step printed, in plain ASCII when asked."""

from __future__ import annotations

import io

from rich.console import Console

from sleuth.agents.events import ThinkEvent, ToolCallEvent, ToolResultEvent
from sleuth.trace import TraceRenderer


def _printed(ascii_only: bool) -> str:
    out = io.StringIO()
    renderer = TraceRenderer(Console(file=out, width=200), ascii_only=ascii_only)
    renderer(ThinkEvent(content="Search for the ferry rule.", iteration=1))
    renderer(ToolCallEvent(call_id="c1", tool="rag_search", arguments={"query": "ferry"}))
    renderer(
        ToolResultEvent(
            call_id="c1",
            tool="rag_search",
            ok=True,
            status="found 2 sections",
            preview="",
            duration_ms=3.0,
        )
    )
    return out.getvalue()


def test_ascii_markers_are_printed_as_text_not_read_as_style_tags() -> None:
    shown = _printed(ascii_only=True)
    assert "[think] Search for the ferry rule." in shown
    assert "-> rag_search" in shown and "<- [OK] found 2 sections" in shown
    assert shown.isascii()
    assert "💭 Search for the ferry rule." in _printed(ascii_only=False)
