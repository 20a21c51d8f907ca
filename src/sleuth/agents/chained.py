"""Chained sub-questions: a compositional question answered one hop at a time.

A compositional question *describes* an entity where a simple question would name it: "Who
is the spouse of **the director of Race for Dawn**?", "What is the lake in **the
country where the Tarn River rises**?", "What ship sank off **Odile Varga's
birthplace**?". :func:`split_compositional` finds the innermost such description — it holds a
name and no other description — and turns it into a sub-question of its own ("What is the
name of the director of Race for Dawn?"), leaving the rest of the question with a slot. A
model answers the sub-question from what a search for it finds; its answer fills the slot
("Who is the spouse of Ansel Roux?"), and the filled question is split again, up to
:data:`MAX_HOPS` times, then answered the same way (:func:`answer_in_hops`).

This is self-ask (Press et al., 2023, "Measuring and Narrowing the Compositionality Gap in
Language Models", arXiv:2210.03350) with retrieval at every step as in IRCoT (Trivedi et
al., 2023, arXiv:2212.10509), except that the follow-up questions come from the question's
syntax, not from the model: a 1.5B model asked to write them repeats the question or its
few-shot examples, while it answers a one-hop question over three sections well. The
model's answers build every later query.

Three description forms are read (``NAME`` is a run of capitalised words or numbers):

* possessive — ``NAME's`` + up to three lower-case words ("Grey Owl's main director");
* ``the`` + up to three lower-case words + ``of`` + up to two more + ``NAME`` ("the author
  of Glass Tide", "the director of the romantic comedy Salt Meadow");
* relative clause — ``the`` + up to three words + ``where`` / ``that`` / ``which`` / ``who``
  / ``whose`` / ``in which`` + a clause that holds a name: up to the name and its verb
  ("the city where Ilse Marrow died"), or to the end of the question when the name comes
  later ("the person who broke the tea tax in Ostland in 1910").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.generation import EvidenceSection, UsageSink, generate_draft
from sleuth.agents.question import split_question
from sleuth.agents.structured import StructuredResult
from sleuth.ingest.references import extract_references
from sleuth.retrieval.text import named_phrases, terms

MAX_HOPS = 3
"""Descriptions resolved per question before the filled question is answered (MuSiQue
questions have 2 to 4 hops)."""
HOP_SECTIONS = 3
"""Sections a hop's search gives the model to read: a one-hop question needs few, and every
extra one is a distractor a small model may answer from."""
MAX_SLOT_WORDS = 6
"""A hop's answer longer than this fills the slot with the last new name it gives ("Glass Tide
is a play by the Brevanian playwright Tomas Eld" → "Tomas Eld")."""

_CAP = "A-Z0-9À-ÖØ-Þ"
_NAME = (
    rf"(?:[{_CAP}][\w.\-]*"
    r"(?:\s+(?:of|for|the|and|und|de|du|la|le|von|van|da|di|del|a|an|in|on)\s+(?=[" + _CAP + r"]))?"
    r"\s*)+"
)
"""A name: capitalised words or numbers, joined by the small words names hold ("Bastien und
Bastienne", "Race for Dawn")."""
_BOUNDARY = (
    r"(?:is|was|are|were|did|does|do|has|had|have|in|on|at|to|from|by|with|during|where|when|"
    r"that|which|who|whose|and|or|as|for|became|become)"
)
"""Words that end a description's head: a verb or a preposition starts the rest."""
_AUX = r"(?:is|was|are|were|has been|had been|has|had)"
_PREPOSITION = r"(?:in|on|at|to|from|by|with|during|and|or|as|for|has|have|had|is|was|became)"
_POSSESSIVE = re.compile(rf"(?<![\w])({_NAME})['’]s\s+")
_HEAD_WORD = re.compile(rf"(?!{_BOUNDARY}\b|\w+ed\b)[a-z][\w\-]*")
_OF_NAME = re.compile(
    rf"\b[Tt]he\s+(?:(?!of\b|{_BOUNDARY}\b)[a-z][\w\-]*\s+){{1,3}}of\s+(?:the\s+)?"
    rf"(?:(?!of\b|{_BOUNDARY}\b)[a-z][\w\-]*\s+){{0,2}}{_NAME}"
)
_RELATIVE = re.compile(
    r"\b[Tt]he\s+(?:[a-z][\w\-]*\s+){1,3}(?:where|in which|that|which|who|whose)\s+"
)
_CLAUSE_NAME = re.compile(
    rf"(?:the\s+)?({_NAME})\s*(?:{_AUX}\s+)?(?:(?!{_PREPOSITION}\b)[a-z]+\b"
    r"(?:\s+(?:into|up|out|off|place)\b)?)?"
)
_PHRASE_END = re.compile(rf"\s*(?:$|[?,.;:!)]|(?:{_BOUNDARY}|a|an|the|\w+ed)\b)")
"""What may follow a description: the question's end, punctuation, a verb or preposition
("… is", "… in"), an article; not a noun ("a German *musician*": the name was an adjective)
nor an apostrophe ("Anna Kells' character")."""


_ATTRIBUTE_HEADS = frozenset(
    (
        "profession",
        "occupation",
        "voice",
        "birth",
        "death",
        "basis",
        "name",
        "number",
        "population",
        "date",
        "year",
        "time",
        "age",
        "height",
        "length",
        "size",
        "type",
        "kind",
        "role",
        "part",
        "title",
        "meaning",
        "origin",
        "nationality",
        "genre",
        "cause",
        "history",
        "style",
        "rest",
        "end",
        "start",
        "beginning",
    )
)
"""Heads that describe an attribute, not an entity to look up first ("the profession of
Amy Vell", "the birth of Ro Young"): the question asks for them, it does not build on them.
Kept after trying without (2026-12-05): of the 231 MuSiQue, HotpotQA and judged-statute
questions, two more split, both into a hop no answer can fill ("What is the name of the birth
of Robert Young?" in a dev "Which came first …" question; "… the voice of Rosie" in test);
a split only when the description follows the opening words lost a real bridge ("When was
the company founded for which …?")."""


def _head(description: str) -> str:
    """The head noun of a description: its last word before "of" or the relative word, after
    a possessive ("the author of X" → "author"; "X's main director" → "director")."""
    text = re.split(r"\b(?:of|where|that|which|who|whose|in which)\b", description)[0]
    text = re.split(r"['’]s ", text, maxsplit=1)[-1]
    found = re.findall(r"[a-z][\w\-]*", text)
    return found[-1] if found else ""


@dataclass(frozen=True)
class Split:
    """One description of a compositional question, and the question around it.

    ``question == before + description + after``; :meth:`fill` puts an answer in its place.
    """

    description: str
    before: str
    after: str

    @property
    def sub_question(self) -> str:
        """The description as a question that asks for a name: "What is the name of the
        director of X?" ("Who is the person who …?" when the description is a "who" clause).

        One form for every head noun, with no list of the nouns that describe a person:
        against "Who is …" for a list of 46 person nouns and "What is …" for the rest, the
        local 1.5B model on the MuSiQue ``dev`` split (26, guided, 2026-12-05) went from
        F1 0.106 to 0.22-0.25 (two runs) and answer-contains 0.46 to 0.54-0.58: asked "What
        is the city where X died?" it gave no short answer four times, which "What is the
        name of …" fixed. On ``test``, once: F1 0.101 -> 0.138, answer-contains 0.32 -> 0.28."""
        text = self.description
        if text.startswith("The "):
            text = "t" + text[1:]
        if re.search(r"\bwho\b", text):
            return f"Who is {text}?"
        return f"What is the name of {text}?"

    def fill(self, answer: str) -> str:
        """The question with ``answer`` in the description's place."""
        return f"{self.before}{answer}{self.after}"


def _possessives(question: str) -> list[tuple[int, int]]:
    spans = []
    for match in _POSSESSIVE.finditer(question):
        ends: list[int] = []
        at = match.end()
        for _ in range(3):
            word = _HEAD_WORD.match(question, at)
            if word is None:
                break
            ends.append(word.end())
            at = word.end() + len(question[word.end() :]) - len(question[word.end() :].lstrip())
        visible = [end for end in ends if _PHRASE_END.match(question, end)]
        if not visible:  # "Ostland's best selling tea brand": no end in sight
            continue
        end = visible[-1]
        spans.append((match.start(), end))
    return spans


def _relatives(question: str) -> list[tuple[int, int]]:
    spans = []
    stop = len(question.rstrip("?. "))
    for match in _RELATIVE.finditer(question):
        clause = _CLAUSE_NAME.match(question, match.end())
        if clause and clause.group(1).strip():
            spans.append((match.start(), clause.end()))
            continue
        tail = re.match(r"[^,?]*", question[match.end() :])
        end = match.end() + (len(tail.group(0)) if tail else 0)
        if end >= stop and re.search(_NAME, question[match.end() : end]):
            spans.append((match.start(), end))
    return spans


def _trimmed(q: str, start: int, end: int) -> tuple[int, int]:
    """A span without the blanks and punctuation it ends with."""
    return start, start + len(q[start:end].rstrip("?,. "))


def _describes(q: str, start: int, end: int) -> bool:
    """Whether ``q[start:end]`` is a description worth its own hop (see
    :func:`split_compositional`)."""
    description = q[start:end]
    if extract_references(description) or not terms(f"{q[:start]} {q[end:]}"):
        return False
    head = _head(description)
    plural = head.endswith("s") and not head.endswith(("ss", "us"))
    if head in _ATTRIBUTE_HEADS or head.endswith("ing") or plural:
        return False  # an attribute, an event ("the forming of X"), several ("the founders")
    return _PHRASE_END.match(q, end) is not None


def split_compositional(question: str) -> Split | None:
    """The innermost description of ``question`` as a :class:`Split`, or ``None``.

    Of the descriptions found (possessive, "the X of NAME", relative clause), those holding
    no other are the innermost; the shortest of them is taken. ``None`` when there is none;
    when the question has parts to answer apart
    (:func:`~sleuth.agents.guided.agents.split_question`); when the description names a
    statute section (a section reference is already a name), is an attribute ("the
    profession of X", "the forming of X") or a plural ("the founders of X"), or is followed
    by a noun or an apostrophe (its name was an adjective: "a German musician"); or when the
    rest of the question holds no content word ("Who is the spouse of Tim Burton?" is one
    lookup, not a description inside a question).
    """
    q = " ".join(question.split())
    if split_question(q)[0]:
        return None  # parts to answer apart ("Which came first, X or the birth of Y?")
    spans = _possessives(q)
    # "the spouse of Grey Owl's director": the name is a possessor, the description goes on
    # tried at every "the": one description may hold another ("the birthplace of the
    # author of X"), and a scan that resumes after a match would miss the inner one
    starts = (m.start() for m in re.finditer(r"\b[Tt]he\b", q))
    spans += [
        (m.start(), m.end())
        for m in (_OF_NAME.match(q, at) for at in starts)
        if m is not None and not q[m.end() :].startswith(("'", "’"))
    ]
    spans += _relatives(q)
    valid = [span for span in (_trimmed(q, a, b) for a, b in spans) if _describes(q, *span)]
    # innermost among the valid ones: an attribute inside a description ("the protests of
    # 1989" in "the person who ruled X during the protests of 1989") does not hide it
    inner = [s for s in valid if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in valid)]
    if not inner:
        return None
    start, end = min(inner, key=lambda s: (s[1] - s[0], s[0]))
    return Split(description=q[start:end], before=q[:start], after=q[end:])


def slot_value(answer: str, sub_question: str) -> str:
    """What a hop's answer puts in the slot: the answer itself, or — when it runs past
    :data:`MAX_SLOT_WORDS` words — the last name it gives that the sub-question does not;
    the answer itself when it gives none."""
    answer = answer.strip().rstrip(".")
    if len(answer.split()) <= MAX_SLOT_WORDS:
        return answer
    asked = set(terms(sub_question))
    new = [name for _, name in named_phrases(answer) if not set(terms(name)) <= asked]
    return new[-1] if new else answer


@dataclass
class Hop:
    """One answered (sub-)question: what was asked, the draft the model gave, its sections."""

    question: str
    draft: AnswerDraft
    source_ids: list[str] = field(default_factory=list)

    @property
    def answer(self) -> str | None:
        """The short answer, ``None`` when the hop found none."""
        if self.draft.is_insufficient_context or not self.draft.short_answer:
            return None
        return self.draft.short_answer.strip() or None

    def to_dict(self) -> dict[str, Any]:
        """The hop as JSON-able data (kept in a ReAct turn between steps)."""
        return {
            "question": self.question,
            "draft": self.draft.model_dump(),
            "source_ids": list(self.source_ids),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hop:
        """The hop :meth:`to_dict` gave."""
        return cls(
            question=str(data["question"]),
            draft=AnswerDraft.model_validate(data["draft"]),
            source_ids=[str(s) for s in data.get("source_ids", [])],
        )


def read_hop(
    question: str,
    evidence: list[EvidenceSection],
    model: Any,
    usage: UsageSink | None = None,
) -> tuple[Hop, StructuredResult[AnswerDraft]]:
    """One hop read by the model: the guided generator over ``evidence`` (no answer when
    the call fails or the reply is empty), as a :class:`Hop` and the generator's result."""
    result = generate_draft(
        question,
        evidence,
        model,
        fallback=lambda: AnswerDraft(answer_text="", is_insufficient_context=True),
        usage=usage,
    )
    hop = Hop(question=question, draft=result.value, source_ids=[e.source_id for e in evidence])
    return hop, result


Reader = Callable[[str], Hop]
"""Answers one (sub-)question: searches it, has the model read what was found."""


def next_question(question: str, hops: list[Hop], max_hops: int = MAX_HOPS) -> str | None:
    """What the chain of ``question`` asks next, given the ``hops`` answered so far.

    The question's innermost description's sub-question, or — once each answer has filled
    its description (at most ``max_hops``) — the filled question itself. ``None`` when the
    chain is over: the filled question was answered, a hop found no answer, or ``question``
    is not compositional.
    """
    current, depth = question, 0
    for hop in hops:
        split = split_compositional(current) if depth < max_hops else None
        if hop.answer is None or split is None:
            return None  # a hop without an answer, or the filled question's own hop
        current = split.fill(slot_value(hop.answer, split.sub_question))
        depth += 1
    split = split_compositional(current) if depth < max_hops else None
    if split is not None:
        return split.sub_question
    return current if hops else None


def answer_in_hops(question: str, read: Reader, max_hops: int = MAX_HOPS) -> list[Hop]:
    """Answer ``question`` description by description, each answer filling the next query
    (:func:`next_question`); ``read`` answers each.

    Returns every hop read, in order; the last is the filled question's when the chain
    completed (``[]`` when the question is not compositional). A hop without an answer ends
    the chain (it is the last one returned).
    """
    hops: list[Hop] = []
    while (asked := next_question(question, hops, max_hops)) is not None:
        hops.append(read(asked))
    return hops


def chained_draft(hops: list[Hop]) -> AnswerDraft | None:
    """The answer of a completed chain: the last hop's short answer, with every hop's cited
    facts in order ("Race for Dawn was directed by Ansel Roux [4]. Ansel Roux
    married Dora Pike [7]."); ``None`` when the chain did not complete."""
    if not hops or any(h.answer is None for h in hops):
        return None
    last = hops[-1].draft
    facts = " ".join(h.draft.answer_text.strip() for h in hops if h.draft.answer_text.strip())
    citations = list(dict.fromkeys(c for h in hops for c in h.draft.citations))
    return last.model_copy(update={"answer_text": facts, "citations": citations})
