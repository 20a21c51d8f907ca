"""A final answer read from a model's plain-text reply (both modes use it)."""

from __future__ import annotations

import re
from functools import cache

import json_repair
from pydantic import ValidationError

from sleuth.agents.answer import MARKERS, AnswerDraft
from sleuth.agents.citations import cited_ids, clean_answer_text
from sleuth.agents.reader import complete_sentences
from sleuth.prompts import load_prompt
from sleuth.retrieval.text import words

_INSUFFICIENT = re.compile(
    r"^\s*(insufficient context|i (?:do not|don't|cannot|can't) (?:know|find|answer))|"
    r"(?:not enough information|does not contain (?:the|any|enough)|"
    r"(?:results|evidence|sections|knowledge base) (?:do|does) not (?:answer|say|mention))",
    re.I,
)
_ANSWER_LABEL = re.compile(r"^\s*(?:final answer|answer)\s*:\s*", re.I)
_SHORT_LINE = re.compile(
    r"^\s*(?:\*\*)?(?:short answer|final answer|answer)(?:\*\*)?\s*:\s*(.*)$", re.I
)
_EXPLANATION = re.compile(
    r"^\s*(?:\*\*)?(?:explanation|because|reason|evidence|details?)(?:\*\*)?\s*:\s*", re.I
)
_ECHO = re.compile(r"^\s*\[\d+\]\s+\S+\s+·\s")
"""A line that repeats an evidence header (``[2] BNS_S103 · …``): the model echoing it."""
SHORT_ANSWER_CHARS = 120


_LEADING_MARKER = re.compile(
    r"(^|(?<=[.!?])[ \t]+)(\[\d+(?:\s*,\s*\d+)*\])[ \t]+([^\[\n]+?)([.!?])(?=\s|$)", re.M
)


def _trail(text: str) -> str:
    """``[1] Medici is a board game.`` → ``Medici is a board game [1].`` (a marker the model
    put first, as the evidence is laid out, goes after the claim it supports)."""
    return _LEADING_MARKER.sub(lambda m: f"{m.group(1)}{m.group(3)} {m.group(2)}{m.group(4)}", text)


_FACTS_LINE = re.compile(r"^\s*(?:\*\*)?(?:facts?|evidence used)(?:\*\*)?\s*:\s*(.*)$", re.I)
_NUMBER_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def _facts_first(lines: list[str]) -> list[str] | None:
    """The ``Facts: … / Answer: …`` form (the guided generator's): the lines reordered as
    ``Answer: …`` then the facts, so that :func:`_labelled` reads both. A facts line that only
    lists evidence numbers (``Facts: [1], [3]``) stays a list of markers."""
    if not lines or _FACTS_LINE.match(lines[0]) is None:
        return None
    at = next((i for i, line in enumerate(lines) if _SHORT_LINE.match(line)), None)
    if at is None:
        return None
    facts = [_FACTS_LINE.sub(r"\1", lines[0]), *lines[1:at], *lines[at + 1 :]]
    kept: list[str] = []
    for line in facts:
        if _ECHO.match(line):  # an echoed header still names the evidence it used
            kept.extend(f"[{n}]" for n in _NUMBER_MARKER.findall(line)[:1])
        elif line.strip():
            kept.append(line)
    return [lines[at], *kept]


def _labelled(text: str) -> AnswerDraft | None:
    """The ``Answer: … / Explanation: …`` form the answer prompts ask for, if used (also
    written facts first, see :func:`_facts_first`)."""
    lines = text.strip().splitlines()
    if not lines:
        return None
    lines = _facts_first(lines) or lines
    first = _SHORT_LINE.match(lines[0])
    if first is None:
        return None
    short = first.group(1).strip()
    rest = [line for line in lines[1:] if line.strip() and not _ECHO.match(line)]
    explanation = _trail("\n".join(_EXPLANATION.sub("", line, count=1) for line in rest)).strip()
    if not short and rest:  # "Answer:" alone on its line, the answer below it
        short, explanation = _EXPLANATION.sub("", rest[0]).strip(), "\n".join(rest[1:]).strip()
    plain_short = MARKERS.sub("", short).strip().rstrip(".")
    declined = bool(_INSUFFICIENT.search(plain_short)) or plain_short.lower() in (
        "unknown",
        "none",
        "n/a",
        "not stated",
    )
    if declined:
        if explanation.lower().strip(" .") in ("none", "n/a", "-", "nothing"):
            explanation = "the evidence does not answer the question."
        why = explanation or plain_short
        if not why.lower().startswith("insufficient"):
            why = f"Insufficient context: {why}"
        return AnswerDraft(answer_text=why, is_insufficient_context=True)
    if not explanation:
        return AnswerDraft(answer_text=short, citations=cited_ids(short))
    if len(plain_short) > SHORT_ANSWER_CHARS:  # a sentence, not a short answer
        body = f"{short} {explanation}".strip()
        return AnswerDraft(answer_text=body, citations=cited_ids(body))
    return AnswerDraft(
        answer_text=explanation,
        short_answer=plain_short,
        citations=cited_ids(f"{short} {explanation}"),
    )


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


_INLINE_ECHO = re.compile(
    r"(?:\[[^\]\n]{1,40}\]\s*)?[\w.-]+ · [^\n\[]*"
    r"|[^\n\[]*\S\s>\s[^\n\[]*(?:\[[^\]\n]{1,40}\])?[.;,]?\s*"
)
"""An evidence header copied into a sentence (``[2] BNS_S15 · … > Section 15. Act of Judge``)
or its title path alone (``The … Sanhita, 2023 > Section 480 [3].``): the ``·`` and the ``>``
between titles are the evidence layout's own, never an answer's."""


_NOT_EMPTY = re.compile(r"[^\W_]{2,}")


MARKERS_ONLY_DECLINE = "Insufficient context: the sections read do not answer the question."
"""The text of a model's decline that said nothing but evidence markers."""


def _says_more_than_decline(text: str) -> bool:
    """Whether ``text`` says anything beyond an "insufficient context" phrase and evidence
    markers ("Insufficient context: [1], [2]" does not)."""
    return bool(_NOT_EMPTY.search(MARKERS.sub("", _INSUFFICIENT.sub("", text))))


def bare_text(text: str) -> str:
    """What a reply says, for comparing two replies: its words only, lower-cased — without
    citation markers, a ``Facts: [1], [2]`` line (evidence numbers, no claim), an
    ``Answer:`` label or punctuation."""
    lines = [_ANSWER_LABEL.sub("", line) for line in text.splitlines()]
    said = MARKERS.sub(" ", "\n".join(x for x in lines if not _FACTS_LINE.match(x)))
    return " ".join("".join(c if c.isalnum() else " " for c in said.lower()).split())


def draft_from_text(text: str) -> AnswerDraft | None:
    """Read a final answer from a model's plain reply (:func:`_read_draft`); a decline that
    says nothing but evidence markers ("Insufficient context: [1], [2]", which named what it
    read, not what supports a claim) becomes a decline in words, with no citations."""
    draft = _read_draft(text)
    if (
        draft is not None
        and draft.is_insufficient_context
        and not _says_more_than_decline(draft.answer_text)
    ):
        return draft.model_copy(update={"answer_text": MARKERS_ONLY_DECLINE, "citations": []})
    return draft


def _read_draft(text: str) -> AnswerDraft | None:
    """Read a final answer from a model's plain reply: JSON if it holds an answer, else prose.

    The answer prompts ask for ``Answer: <short answer>`` then ``Explanation: <cited
    sentences>``: the first becomes ``short_answer``, the second the text ("Answer:
    Insufficient context" is a decline). Fences, ``{"answer_text": …}`` objects, labels and
    lines echoing an evidence header never reach the answer text; a reply that says the
    evidence does not answer becomes an insufficient-context draft.
    """
    stripped = text.strip()
    if not stripped:
        return None
    embedded = _embedded_draft(stripped) if "{" in stripped else None
    if embedded is not None:
        return embedded
    labelled = _labelled(clean_answer_text(stripped))
    if labelled is not None:
        return labelled
    prose = _ANSWER_LABEL.sub("", clean_answer_text(stripped)).strip()
    prose = "\n".join(_INLINE_ECHO.sub("", line) for line in prose.splitlines()).strip()
    said = [_FACTS_LINE.sub(r"\1", MARKERS.sub("", line)) for line in prose.splitlines()]
    if not any(_NOT_EMPTY.search(line) for line in said):
        return None  # only labels, markers and copied headers: nothing was answered
    if not prose:
        return None
    insufficient = bool(_INSUFFICIENT.search(prose)) and (
        not cited_ids(prose) or not _says_more_than_decline(prose)
    )
    return AnswerDraft(
        answer_text=prose,
        citations=[] if insufficient else cited_ids(prose),
        is_insufficient_context=insufficient,
    )


@cache
def _instruction_words() -> frozenset[str]:
    """The words of the long-form answer prompt (``guided_answer_long``), lower-cased."""
    return frozenset(words(load_prompt("guided_answer_long")))


def _without_instruction(line: str) -> str:
    """``line`` without a lead-in copied from the prompt's instructions ("One complete
    sentence that answers the question directly: Under the BNSS, …" → "Under the BNSS,
    …"): a label of at least two words, every one of them a word of the prompt, before a
    colon (a singular counts as its plural: "Supporting point:"). A lead-in naming anything
    the prompt does not ("Under the BNSS:") stays, and so does a decline's label."""
    head, colon, rest = line.partition(":")
    bullet = head[: len(head) - len(head.lstrip(" -*"))]  # "- Supporting point: …"
    label, rest = head[len(bullet) :], rest.lstrip()
    said = words(label)
    known = _instruction_words()
    if (
        not colon
        or not rest
        or len(said) < 2
        or len(label) > 80
        or _INSUFFICIENT.match(label)  # a decline's own label
        or not all(w in known or f"{w}s" in known for w in said)
    ):
        return line
    return bullet + rest[:1].upper() + rest[1:]


_POINT = ("-", "*", "•")


def _unbulleted(line: str) -> str:
    """``line`` without the point mark (and spaces) it opens with."""
    return line.lstrip("".join(_POINT) + " ")


_ENDS_SENTENCE = re.compile(r"[.!?…:;][\"')\]]*(?:\s*\[[^\[\]\n]{1,80}\])*[.;:]?\s*$")


def _joined_lines(lines: list[str]) -> list[str]:
    """Facts as whole sentences: a line that goes on a sentence the line before left open
    (that line ends with no ``.``, ``!``, ``?``, ``;`` or ``:``, markers aside) joins it,
    unless it opens a new point ("- " and a capital). A small model copying a statute keeps
    its line breaks ("(1) Whoever, being a member of a gang, either singly or" / "jointly,
    commits …"): each piece alone would be shown as a point of its own."""
    out: list[str] = []
    for line in lines:
        body = _unbulleted(line)
        opens_point = line.startswith(_POINT) and body[:1].isupper()
        if out and not opens_point and not _ENDS_SENTENCE.search(out[-1]):
            out[-1] = f"{out[-1]} {body}"
        else:
            out.append(line)
    return out


def _answer_first(lines: list[str]) -> list[str]:
    """A long-form reply written facts first (``Facts:`` and its points, then ``Answer:``
    and the answer sentence: the prompt ``guided_answer_long``) as the answer reads: the
    answer sentence, then the facts as ``- `` points. A decline (``Answer: Insufficient
    context``) becomes "Insufficient context: <what the facts line says is missing>"; facts
    with no answer after them (the budget stopped the reply) stay the points, the first
    one leading. Any other reply is returned as it is."""
    if not lines or _FACTS_LINE.match(lines[0]) is None:
        return lines
    facts = [_FACTS_LINE.sub(r"\1", lines[0]), *lines[1:]]
    found = next(((i, m) for i, line in enumerate(facts) if (m := _SHORT_LINE.match(line))), None)
    answer = ""
    if found is not None:
        at, label = found
        answer = label.group(1).strip()
        rest = [line for line in facts[at + 1 :] if line.strip()]
        if not answer and rest:  # "Answer:" alone on its line, the sentence below it
            answer, rest = rest[0].strip(), rest[1:]
        facts = facts[:at] + rest
    facts = _joined_lines([line.strip() for line in facts if line.strip()])
    if _INSUFFICIENT.search(MARKERS.sub("", answer)):
        missing = " ".join(map(_unbulleted, facts))
        return [f"Insufficient context: {missing}" if missing else MARKERS_ONLY_DECLINE]
    if not answer:  # the first fact leads
        answer, facts = _unbulleted(facts[0]) if facts else "", facts[1:]
    return [answer, *(line if line.startswith(_POINT) else f"- {line}" for line in facts)]


def draft_from_long_text(text: str, cut: bool = False) -> AnswerDraft | None:
    """Read a long-form answer (the answer sentence, then ``- `` points with their evidence
    numbers; a reply written facts first is reordered so, :func:`_answer_first`): labels and
    fences removed, "Insufficient context: …" recognised, and the text
    cut back to its last complete sentence (:func:`~sleuth.agents.reader.complete_sentences`;
    ``cut``: the model stopped at its token budget). ``None`` when nothing usable is left.
    """
    stripped = text.strip()
    if not stripped:
        return None
    embedded = _embedded_draft(stripped) if stripped.startswith(("{", "```")) else None
    if embedded is not None:
        return embedded
    cleaned = clean_answer_text(stripped)
    # the budget stops the reply at its end: cut it back there, before the answer sentence
    # written last moves to the front
    cleaned = complete_sentences(cleaned, cut=True) if cut else cleaned
    lines = [
        _without_instruction(
            _EXPLANATION.sub(
                "", _ANSWER_LABEL.sub("", _INLINE_ECHO.sub("", line), count=1), count=1
            )
        )
        for line in _answer_first(cleaned.splitlines())
        if not _ECHO.match(line) and not _FACTS_LINE.match(line)
    ]
    lines = [line for line in lines if _NOT_EMPTY.search(_NUMBER_MARKER.sub("", line))]
    prose = _trail(complete_sentences("\n".join(lines).strip()))
    if not prose:
        return None
    if _INSUFFICIENT.search(prose.split("\n", 1)[0]) and not cited_ids(prose.split("\n", 1)[0]):
        why = (
            prose if prose.lower().startswith("insufficient") else f"Insufficient context: {prose}"
        )
        return AnswerDraft(answer_text=why, is_insufficient_context=True)
    return AnswerDraft(answer_text=prose, citations=cited_ids(prose))
