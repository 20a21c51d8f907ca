"""The reader's answer types: what shape an answer takes, its output budget, whole sentences.

A question asks for one of five kinds of answer (:data:`AnswerKind`), read from its form:

* ``yes_no`` — its main clause opens with an auxiliary or modal verb and offers no choice
  ("Can police …?"); the main clause may follow a fronted clause ("If he attacks me, may I
  defend myself?", "When the police question me as a witness, do I have to answer?") or a
  preamble of statements ("My bike was taken. Can I …?"), and a wh-word inside it opens a
  subordinate clause ("Can I claim that he never owned it when I moved in?");
* ``procedure`` — asks how to do something or for the steps or procedure;
* ``list`` — asks for the kinds, types, conditions, grounds, exceptions … of something, or
  puts a wh-word before a plural noun ("What reasons can …", "In which situations does …");
* ``explanation`` — asks why, to explain or describe, what something is or does, what
  happens or what one can do ("What is a dying declaration?", "What does the law say …"),
  how something is or must be done, or when or by whom it can or must be ("When does a
  confession become …", "Who can ask …");
* ``fact`` — everything else: who, when, where, which in the past or of one thing, how
  many / long / much, "what X of Y", a name, a term, a punishment, an amount, a choice ("Is
  it A or B?").

Each kind gets an output budget (:data:`OUTPUT_TOKENS`, tokens the model may write, and
:data:`POINTS`, the supporting points the prompt asks for). A model's reply is cut back to its
last complete sentence (:func:`complete_sentences`) — the budget never leaves half a sentence.
"""

from __future__ import annotations

import itertools
import re
from typing import Literal

from sleuth.agents.answer import MARKERS
from sleuth.retrieval.text import words

AnswerKind = Literal["fact", "yes_no", "explanation", "list", "procedure"]
OUTPUT_TOKENS: dict[AnswerKind, int] = {
    "fact": 160,
    "yes_no": 200,
    "explanation": 260,
    "list": 300,
    "procedure": 300,
}
"""Tokens the reader may write per answer kind: a sentence of law is ~30–45 tokens with its
citation marker, so each budget holds the answer sentence and the points :data:`POINTS` asks
for with room to spare (a small local model writes ~8 tokens/s on 2 cores: the budget is also
the reader's worst-case time)."""
SHORT_ANSWER_WORDS = 8
"""A model answer whose first sentence has at most this many words (markers removed) and
that goes on after it opens with a short answer (the entity, date, number or yes/no)."""
POINTS: dict[AnswerKind, str] = {
    "fact": "one or two",
    "yes_no": "one or two",
    "explanation": "two or three",
    "list": "one per item (at most five)",
    "procedure": "one per step (at most five)",
}
"""How many supporting points the long-form prompt asks for, per kind."""

_AUX = (
    r"am|is|are|was|were|do|does|did|can|could|may|might|must|shall|should|will|would|"
    r"has|have|had|need"
)
_YES_NO = re.compile(rf"^\s*(?:{_AUX})(?:n't)?\b", re.I)
_CHOICE = re.compile(r"\bor\s+(?:\S+\s+){0,4}\S+$", re.I)
"""An "or" with at most five words after it to the end: the options close the question ("Is
the fee paid by the buyer or by the seller?"); an "or" inside the subject ("Does an email or
a letter carry the same weight as …?") leaves a yes/no question."""
_WH_OPENS = re.compile(
    rf"^\s*(?:(?:and|but|or|in|on|at|for|from|to|by|with|under|of)\s+)?"
    rf"(?:what|which|who|whom|whose|when|where|why|how)\b(?P<asks>'s|\s+(?:\w+\s+)?(?:{_AUX})\b)?",
    re.I,
)
"""A clause opening with a wh-word (after a conjunction or preposition: "and who …", "In
which …"). It asks for something when an auxiliary follows at once or after one more word
(group ``asks``: "What is …", "How long can …"); a wh-word followed by a subject opens a
fronted clause instead ("When the police question me, …")."""
_ASKS_TO_TELL = re.compile(
    rf"^\s*(?:{_AUX})\s+you\s+(?:please\s+)?(?:tell|explain|describe|list|say|show|know)\b",
    re.I,
)
"""A request put as a yes/no question ("Can you tell me what …?", "Do you know who …?")."""
_IN_SITU = re.compile(r"\b(?:which|what)\b", re.I)
"""After a subject and a comma, an auxiliary opens no question: the question's own wh-word
sits in the clause ("X, known for …, is father to which actress?")."""
_PROCEDURE = re.compile(r"\bhow (?:do|does|can|should|would|to)\b|\b(?:steps?|procedure)\b", re.I)
_LIST = re.compile(
    r"\b(?:what|which)\s+(?:are|were)\s+the\s+(?:\w+\s+)?(?:kinds?|types?|grounds|"
    r"conditions|exceptions|cases|circumstances|duties|rights|powers|ways|offences|steps)\b|"
    r"\b(?:list|name)\s+(?:the|all)\b|\bwhich\s+(?:kinds?|types?)\b",
    re.I,
)
_SEVERAL = re.compile(
    r"\b(?:kinds|sorts|types)\s+of\b|"
    r"\b(?:what|which)\s+(?:\w+\s+)?(?!(?:was|is|has|does|his|its|this|us|as)\b)"
    rf"\w{{2,}}(?<!ss)(?<!us)(?<!is)s\s+(?:{_AUX})\b",
    re.I,
)
"""A wh-determiner before a plural noun and its verb ("What reasons can …", "In which
situations does …", "What formalities must …"), or kinds of something: several items.

With :data:`_RULE_ASKED`, written on the judged statute set's ``dev`` labels: the form the
generator asks in (short answer or sentences) agrees with the ``answer_type`` labels on
0.66 → 0.91 of ``dev`` and 0.69 → 0.86 of ``test`` in-corpus questions; HotpotQA ``test``
0.98 → 0.95 (two of 61 read long: "What actresses were involved …", "how is X … connected"),
MuSiQue unchanged (``bench/bench_answer_kind.py``)."""
_RULE_ASKED = re.compile(
    r"\bhow\s+(?:is|are|must|shall|may)\b|"
    r"\b(?:when|who|whom)\s+(?:can|could|may|might|must|shall|should|does|do|has\s+to|"
    r"have\s+to|need)\b",
    re.I,
)
"""A rule asked for: the manner something is or must be done ("How are trials
conducted …", "how must the search be recorded"), or when or by whom something can, must
or does happen — its conditions ("When does a confession become …", "Who can ask …"). Asked
in the past ("When was …", "Who did …") the answer is a fact."""
_FACT = re.compile(
    r"\bhow (?:many|much|long|old|far|soon|often)\b|"
    r"^\s*what\s+(?:is|was|are|were)\s+the\s+\w+(?:\s+\w+)?\s+(?:of|for|in|to|on)\b",
    re.I,
)
_EXPLAIN = re.compile(
    r"^\s*(?:why|explain|describe|tell me)\b|"
    r"^\s*what\s+(?:is|are|does|do|did|should|happens|can|could|must|will|would|if)\b",
    re.I,
)
_LAST_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_SENTENCE_END = re.compile(r"[.!?…](?:[\"')\]]|\s*\[[^\[\]\n]{1,80}\])*")
_TRAILING_MARKERS = re.compile(r"(?:\s*\[[^\[\]\n]{1,80}\])+\s*$")


def answer_kind(question: str) -> AnswerKind:
    """The kind of answer ``question`` asks for (module docstring); the last sentence of a
    question with a preamble ("My bike was taken. Can I …?") is read."""
    q = " ".join(question.split())
    last = _LAST_SENTENCE.split(q)[-1]
    # its last sentence, or the whole of a one-sentence question ("St. Louis" splits wrongly)
    main = _main_clause(last) or ("?" not in q[:-1] and _main_clause(q)) or None
    if main is not None:
        return "fact" if _CHOICE.search(main.rstrip(" ?")) else "yes_no"  # "A or B?": a choice
    if _PROCEDURE.search(last):
        return "procedure"
    if _LIST.search(last) or _SEVERAL.search(last):
        return "list"
    if _FACT.search(last):
        return "fact"
    return "explanation" if _RULE_ASKED.search(last) or _EXPLAIN.search(last) else "fact"


_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_CONJUNCTION = re.compile(r"^\s*(?:and|but|or|so)\s+", re.I)


def _clause_starts(sentence: str) -> list[int]:
    """Where ``sentence``'s clauses begin: its start, and right after each ", "."""
    return [0, *(i + 2 for i in range(len(sentence)) if sentence.startswith(", ", i))]


def asks_yes_or_no(question: str) -> bool:
    """Whether any part of ``question`` asks yes or no: a sentence, or a clause after a
    comma, that opens with an auxiliary or modal verb ("Is there a deadline? What are the
    limits?", "If he hits me, can I hit back?", "How long can he be held, and can he get
    bail?"), a request to tell ("Can you tell me …") aside. A bare "Yes" or "No" answers
    nothing else: "What's the fine for …?" answered "No" has no answer."""
    for sentence in _SENTENCES.split(" ".join(question.split())):
        for start in _clause_starts(sentence):
            clause = _CONJUNCTION.sub("", sentence[start:])
            if _YES_NO.match(clause) and not _ASKS_TO_TELL.match(clause):
                return True
    return False


def _main_clause(sentence: str) -> str | None:
    """The clause of ``sentence`` that asks yes or no, from its opening auxiliary verb to the
    end; ``None`` when it asks something else. The clause is the sentence itself or follows
    a comma ("If he attacks me, may I defend myself?"). It does not ask yes or no when what
    comes before it asks for something, or a clause after it opens with a wh-word
    (:data:`_WH_OPENS`: "How long can he be held, and can he get bail?", "Is there such an
    offence, and what's the least sentence?"), when it follows a comma and holds the
    question's wh-word (:data:`_IN_SITU`), or when it is a request to tell
    (:data:`_ASKS_TO_TELL`)."""
    starts = _clause_starts(sentence)
    for start in starts:
        clause = sentence[start:]
        if _YES_NO.match(clause):
            fronted = _WH_OPENS.match(sentence[:start])
            asked = (fronted and fronted["asks"]) or _ASKS_TO_TELL.match(clause)
            later = any(_WH_OPENS.match(sentence[i:]) for i in starts if i > start)
            in_situ = start > 0 and _IN_SITU.search(clause)
            return None if asked or later or in_situ else clause
    return None


def sentence_opening(text: str) -> str:
    """``text`` opening as a sentence: a list marker before its first words is dropped and
    their first letter capitalised. A small model may skip the answer sentence and open
    with its first supporting point ("- The rule states …"), or give a short answer in the
    statute's own lower-case words ("imprisonment of either description …"), which the
    answer then begins with; the same after an opening "Yes." or "No."."""
    body = text.lstrip()
    if body[:1] in ("-", "*", "•") and body[1:2].isspace():
        body = body[1:].lstrip()
    body = body[:1].upper() + body[1:]
    verdict, _, rest = body.partition(" ")
    if verdict in ("Yes.", "No.") and rest:  # "Yes. the man is committing a crime"
        return f"{verdict} {sentence_opening(rest)}"
    return body


REPEAT_MIN_WORDS = 3
"""Words a sentence needs for a later copy of it to count as a repeat ("5 years." may
rightly recur; a rule sentence does not)."""


def without_repeats(text: str) -> str:
    """``text`` without the sentences that repeat an earlier one word for word (case,
    spacing, punctuation and citation markers aside; :data:`REPEAT_MIN_WORDS` words at
    least), nor a wordless piece ("…") right after a dropped repeat. A small model decoding
    greedily can loop on one sentence ("A has committed mischief. … A has committed
    mischief. …"); the answer states it once. A stop before a digit or a lower-case word
    ends no sentence. Lines are kept; a line left empty goes."""
    seen: set[str] = set()
    lines = []
    for line in text.split("\n"):
        cuts = [0, *(m.end() for m in _SENTENCE_END.finditer(line)), len(line)]
        kept: list[str] = []
        dropped = False
        pieces: list[str] = []
        for a, b in itertools.pairwise(cuts):
            piece = line[a:b]
            head = piece.lstrip()[:1]
            # "Rs. 1.5 lakh", "No. 4", "e.g. the": a stop before a digit or a lower-case
            # word ends no sentence
            if pieces and head and (head.isdigit() or head.islower()):
                pieces[-1] += piece
            elif piece:
                pieces.append(piece)
        for piece in pieces:
            said = words(MARKERS.sub("", piece))
            key = " ".join(said)
            if (len(said) >= REPEAT_MIN_WORDS and key in seen) or (not said and dropped):
                dropped = True
                continue
            dropped = False
            seen.add(key)
            kept.append(piece)
        if kept or not line.strip():
            lines.append("".join(kept).rstrip())
    return "\n".join(lines).strip()


def complete_sentences(text: str, cut: bool = False) -> str:
    """``text`` cut back to the end of its last complete sentence (a ``.``, ``!``, ``?`` or
    ``…``, with any closing quotes, brackets and citation markers after it), so that an
    answer stopped by its token budget never ends mid-sentence. Text that already ends a
    sentence is returned as it is. Text with no complete sentence at all is ``""`` when
    ``cut`` (the model was stopped by its budget: what it wrote is a fragment), else it is
    closed with a period (a model that simply left the period off).

    Lines are kept: a list whose last item has no period is closed with one, unless the
    budget cut it and an earlier line is complete (then it is dropped).
    """
    text = text.rstrip()
    if not text:
        return ""
    body = _TRAILING_MARKERS.sub("", text).rstrip()
    if body and body[-1] in ".!?…\"')]":
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    last_line = text.rsplit("\n", 1)[-1].lstrip()
    if last_line[:1] in ("-", "*", "•") or re.match(r"\d{1,2}[.)]\s", last_line):
        # a list item the budget cut: drop it when an earlier line ended, else close it
        head = text.rsplit("\n", 1)[0] if "\n" in text else ""
        if cut and head and ends and ends[-1] <= len(head):
            return complete_sentences(head)
        return f"{text}."
    if ends:
        return text[: ends[-1]].rstrip()
    return "" if cut else f"{text}."
