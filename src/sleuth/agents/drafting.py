"""A final answer read from a model's plain-text reply (both modes use it)."""

from __future__ import annotations

import re

import json_repair
from pydantic import ValidationError

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.citations import cited_ids, clean_answer_text

_INSUFFICIENT = re.compile(
    r"^\s*(insufficient context|i (?:do not|don't|cannot|can't) (?:know|find|answer))|"
    r"(?:not enough information|does not contain (?:the|any|enough)|"
    r"(?:results|evidence|sections|knowledge base) (?:do|does) not (?:answer|say|mention))",
    re.I,
)
_ANSWER_LABEL = re.compile(r"^\s*(?:final answer|answer)\s*:\s*", re.I)


def _embedded_draft(text: str) -> AnswerDraft | None:
    """An ``AnswerDraft`` written as JSON in the text (fenced or not), if there is one."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json_repair.loads(text[start : end + 1])
    except Exception:
        return None
    if not isinstance(data, dict):
        return None
    for key in ("arguments", "args", "parameters"):
        if isinstance(data.get(key), dict):
            data = data[key]
    value = next((data[k] for k in ("answer_text", "answer") if isinstance(data.get(k), str)), None)
    if value is None:
        return None
    try:
        return AnswerDraft.model_validate({**data, "answer_text": value})
    except ValidationError:
        return AnswerDraft(answer_text=value)


def draft_from_text(text: str) -> AnswerDraft | None:
    """Read a final answer from a model's plain reply: JSON if it holds an answer, else prose.

    Fences, ``{"answer_text": …}`` objects and "Answer:" labels never reach the answer text;
    a reply that says the evidence does not answer becomes an insufficient-context draft.
    """
    stripped = text.strip()
    if not stripped:
        return None
    embedded = _embedded_draft(stripped) if "{" in stripped else None
    if embedded is not None:
        return embedded
    prose = _ANSWER_LABEL.sub("", clean_answer_text(stripped)).strip()
    if not prose:
        return None
    insufficient = bool(_INSUFFICIENT.search(prose)) and not cited_ids(prose)
    return AnswerDraft(
        answer_text=prose,
        citations=[] if insufficient else cited_ids(prose),
        is_insufficient_context=insufficient,
    )
