"""Citation validation: every cited id must name a section retrieved in this run.

Markers in the answer text are ``[source_id]`` (also accepted: ``[Source: id]``,
``[id1, id2]``). A cited id that was not retrieved is removed from the citations and from the
text, and recorded with the reason, for the trace.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from sleuth.agents.answer import AnswerDraft, Citation, GeneratedAnswer
from sleuth.retrieval.search import join_parts
from sleuth.types import Chunk

_MARKER = re.compile(
    r"\[(?:sources?:\s*)?([A-Za-z0-9_.#:-]+(?:\s*[,;]\s*[A-Za-z0-9_.#:-]+)*)\]", re.I
)
_TOOL_PREFIX = re.compile(r"^\s*functions\.\w+\s*:?\s*$", re.M)
_RAW_REACT = re.compile(
    r"^\s*(thought|action|action input|observation|final answer)\s*:\s*", re.I | re.M
)
CITATION_TEXT_CHARS = 2000


class RemovedCitation(BaseModel):
    source_id: str
    reason: str


def cited_ids(text: str) -> list[str]:
    """Source ids named by citation markers in ``text``, in order of first appearance."""
    found: list[str] = []
    for match in _MARKER.finditer(text):
        for sid in re.split(r"\s*[,;]\s*", match.group(1)):
            sid = sid.split("#", 1)[0]
            if sid and sid not in found:
                found.append(sid)
    return found


def _strip_markers(text: str, invalid: set[str]) -> str:
    def fix(match: re.Match[str]) -> str:
        ids = [
            s for s in re.split(r"\s*[,;]\s*", match.group(1)) if s.split("#", 1)[0] not in invalid
        ]
        return f"[{', '.join(ids)}]" if ids else ""

    cleaned = _MARKER.sub(fix, text)
    return re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned)).strip()


def clean_answer_text(text: str) -> str:
    """Remove raw ReAct scaffolding ("Thought:", "Action:" lines, bare "functions.name:"
    tool prefixes some servers leak) from a model's answer."""
    lines = []
    for line in _TOOL_PREFIX.sub("", text).splitlines():
        match = _RAW_REACT.match(line)
        if match and match.group(1).lower() in ("thought", "action", "action input", "observation"):
            continue
        lines.append(_RAW_REACT.sub("", line))
    return "\n".join(lines).strip()


def validate_citations(
    draft: AnswerDraft, retrieved: dict[str, list[Chunk]]
) -> tuple[GeneratedAnswer, list[RemovedCitation]]:
    """Check a draft's citations against the sections retrieved in this run.

    Args:
        draft: the reasoner's proposed answer.
        retrieved: ``source_id`` → chunks surfaced by tools in this run.

    Returns:
        The validated answer (citations in order of first mention, each with the section's
        text) and the list of removed citations with the reason.
    """
    text = clean_answer_text(draft.answer_text)
    wanted = cited_ids(text)
    for sid in draft.citations:
        sid = sid.strip().strip("[]").split("#", 1)[0]
        if sid and sid not in wanted:
            wanted.append(sid)
    removed = [
        RemovedCitation(source_id=sid, reason="not retrieved in this run")
        for sid in wanted
        if sid not in retrieved
    ]
    invalid = {r.source_id for r in removed}
    text = _strip_markers(text, invalid) if invalid else text
    citations = []
    if not draft.is_insufficient_context:
        for sid in wanted:
            if sid in invalid:
                continue
            chunks = retrieved[sid]
            body = join_parts(chunks)
            citations.append(
                Citation(source_id=sid, title=chunks[0].heading, text=body[:CITATION_TEXT_CHARS])
            )
    answer = GeneratedAnswer(
        answer_text=text,
        key_points=[clean_answer_text(p) for p in draft.key_points if p.strip()],
        citations=citations,
        is_insufficient_context=draft.is_insufficient_context,
    )
    return answer, removed
