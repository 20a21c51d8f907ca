"""Citation validation, sentence by sentence.

Markers in the answer text are ``[source_id]`` (also accepted: ``[Source: id]``,
``[id1, id2]``, and the run's evidence numbers ``[3]`` — see
:attr:`sleuth.tools.base.RunContext.numbers`). Each sentence's markers are checked:

1. the cited id (or number) must name a section retrieved in this run — otherwise the marker
   is removed and recorded (:class:`RemovedCitation`);
2. the section must support the sentence (:class:`~sleuth.agents.support.SupportChecker`) —
   otherwise the marker is removed from that sentence and recorded
   (:class:`UnsupportedCitation`, with both scores and the reason).

A sentence left without a supporting citation is *ungrounded*: with ``strict_grounding`` it is
dropped from the answer, otherwise it is kept and listed in
:attr:`~sleuth.agents.answer.GeneratedAnswer.ungrounded_sentences`. A sentence whose cited
sections could not check it (no content words, or a script the semantic model cannot read:
verdict ``unverifiable``) is ungrounded too, and also listed as unverifiable in the trace.
A sentence that instructs the agent or looks like a secret (:mod:`sleuth.agents.safety`:
retrieved text is data) is always dropped, and listed with its reason. Numeric markers are
rewritten to ``[source_id]``; each citation keeps the evidence number it had in the run, so
numbering never changes between rounds of retrieval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from sleuth.agents.answer import AnswerDraft, Citation, GeneratedAnswer
from sleuth.agents.safety import unsafe_reason
from sleuth.agents.support import MIN_CLAIM_TERMS, Support, SupportChecker
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext

_MARKER = re.compile(
    r"\[(?:sources?:\s*)?([A-Za-z0-9_.#:-]+(?:\s*[,;]\s*[A-Za-z0-9_.#:-]+)*)\]", re.I
)
_ID_SEPARATOR = re.compile(r"\s*[,;]\s*")
"""Between the ids of one marker ("[BNS_S103, BNS_S105]")."""
_TOOL_PREFIX = re.compile(r"^\s*functions\.\w+\s*:?\s*$", re.M)
_RAW_REACT = re.compile(
    r"^\s*(thought|action|action input|observation|final answer)\s*:\s*", re.I | re.M
)
CITATION_TEXT_CHARS = 2000
MIN_SENTENCE_WORDS = 3
ATTACH_SEMANTIC_CANDIDATES = 6
"""Sections (cited ones first, then by evidence number) tried semantically when a sentence
without a supported citation gets one attached."""


# a sentence ends at . ! ? (plus any citation markers right after it) before white space
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])((?:[ \t]*\[[^\]\n]{1,200}\])*)[ \t]+(?=[^\s\[])")


class RemovedCitation(BaseModel):
    """A citation marker removed because it names nothing retrieved in this run."""

    source_id: str
    reason: str


class AddedCitation(BaseModel):
    """A citation attached to a sentence that had none (or only unsupported ones) because a
    retrieved section supports it: the model's claim is kept and its source named."""

    source_id: str
    sentence: str
    support: float
    replaced: list[str] = []


class UnsupportedCitation(BaseModel):
    """A citation removed from a sentence whose claim its section does not support
    (``verdict="unsupported"``) or cannot check (``"unverifiable"``)."""

    source_id: str
    sentence: str
    lexical: float
    semantic: float | None = None
    reason: str
    verdict: Literal["unsupported", "unverifiable"] = "unsupported"


class WithheldSentence(BaseModel):
    """An answer (or evidence) sentence dropped because it instructs the agent or looks
    like a secret."""

    sentence: str
    reason: str


@dataclass
class CitationReport:
    """What :func:`validate_citations` produced and changed."""

    answer: GeneratedAnswer
    removed: list[RemovedCitation] = field(default_factory=list)
    unsupported: list[UnsupportedCitation] = field(default_factory=list)
    dropped_sentences: list[str] = field(default_factory=list)
    added: list[AddedCitation] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)
    withheld: list[WithheldSentence] = field(default_factory=list)

    def trace(self) -> dict[str, object]:
        """The report as trace metadata (``citations_removed``, ``citations_unsupported``,
        ``citations_added``, ``sentences_dropped``, ``ungrounded_sentences``,
        ``sentences_unverifiable``: ungrounded because no cited section could check them,
        ``sentences_withheld``: dropped as instructions or secrets, with the reason)."""
        return {
            "citations_removed": [r.model_dump() for r in self.removed],
            "citations_unsupported": [u.model_dump() for u in self.unsupported],
            "citations_added": [a.model_dump() for a in self.added],
            "sentences_dropped": list(self.dropped_sentences),
            "ungrounded_sentences": list(self.answer.ungrounded_sentences),
            "sentences_unverifiable": list(self.unverifiable),
            "sentences_withheld": [w.model_dump() for w in self.withheld],
        }

    def withhold(self, sentence: str, reason: str) -> None:
        """Record a sentence dropped by the safety check (once)."""
        if all(w.sentence != sentence for w in self.withheld):
            self.withheld.append(WithheldSentence(sentence=sentence, reason=reason))


def cited_ids(text: str) -> list[str]:
    """Source ids named by citation markers in ``text``, in order of first appearance."""
    found: list[str] = []
    for match in _MARKER.finditer(text):
        for sid in _ID_SEPARATOR.split(match.group(1)):
            sid = sid.split("#", 1)[0]
            if sid and sid not in found:
                found.append(sid)
    return found


def _tidy(text: str) -> str:
    """Collapse the blanks a removed marker leaves behind."""
    return re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def split_sentences(text: str) -> list[list[str]]:
    """The answer's lines, each split into sentences; markers stay with their sentence.

    ``"A is so [x]. B is not. [y]\nC"`` → ``[["A is so [x].", "B is not. [y]"], ["C"]]``.
    A fragment of fewer than :data:`MIN_SENTENCE_WORDS` words without a marker ("Section
    103.") is kept with the sentence after it.
    """
    lines = []
    for line in text.splitlines():
        if not line.strip():
            lines.append([])
            continue
        parts = _SENTENCE_BREAK.split(line.strip())
        # re.split interleaves the captured trailing markers: glue them back on
        sentences = [parts[0]]
        for i in range(1, len(parts), 2):
            sentences[-1] += parts[i]
            sentences.append(parts[i + 1])
        merged: list[str] = []
        for sentence in (s.strip() for s in sentences if s.strip()):
            # "Section 103." or "No. 4." is a label, not a sentence: keep it with what follows
            if merged and len(merged[-1].split()) < MIN_SENTENCE_WORDS and "[" not in merged[-1]:
                merged[-1] = f"{merged[-1]} {sentence}"
            else:
                merged.append(sentence)
        lines.append(merged)
    return lines


def clean_answer_text(text: str) -> str:
    """Remove raw ReAct scaffolding ("Thought:", "Action:" lines, bare "functions.name:"
    tool prefixes some servers leak) and Markdown code fences (a "```" line, with or
    without a language tag: the text inside is kept) from a model's answer."""
    lines = []
    for line in _TOOL_PREFIX.sub("", text).splitlines():
        if _is_fence_line(line):
            continue
        match = _RAW_REACT.match(line)
        if match and match.group(1).lower() in ("thought", "action", "action input", "observation"):
            continue
        lines.append(_RAW_REACT.sub("", line))
    return "\n".join(lines).strip()


def _is_fence_line(line: str) -> bool:
    """A Markdown fence line: three backticks, then at most a language tag."""
    bare = line.strip()
    tag = bare[3:].replace("-", "").replace("+", "")
    return bare.startswith("```") and (not tag or tag.isalnum())


class _Resolver:
    """Maps a marker's id to a retrieved source_id, or says why it cannot."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.by_number = {n: sid for sid, n in ctx.numbers.items()}

    def resolve(self, raw: str) -> tuple[str | None, str]:
        sid = raw.strip().strip("[]").split("#", 1)[0]
        if sid in self.ctx.retrieved:
            return sid, ""
        if sid.isdigit():
            if int(sid) in self.by_number:
                return self.by_number[int(sid)], ""
            return None, f"no section numbered {sid} was retrieved in this run"
        return None, "not retrieved in this run"


def _resolve_markers(text: str, resolver: _Resolver) -> str:
    """Markers rewritten to retrieved source_ids; markers naming nothing retrieved dropped."""

    def fix(match: re.Match[str]) -> str:
        ids = [resolver.resolve(raw)[0] for raw in _ID_SEPARATOR.split(match.group(1))]
        kept = list(dict.fromkeys(sid for sid in ids if sid))
        return f"[{', '.join(kept)}]" if kept else ""

    return _tidy(_MARKER.sub(fix, clean_answer_text(text)))


class _SentenceChecker:
    """Checks the markers of one sentence at a time, collecting the report."""

    def __init__(self, ctx: RunContext, checker: SupportChecker | None, check: bool) -> None:
        self.ctx = ctx
        self.resolver = _Resolver(ctx)
        self.checker = checker if check else None
        self.report = CitationReport(answer=GeneratedAnswer(answer_text=""))
        self.cited: dict[str, float | None] = {}
        self._reported: set[str] = set()
        self.unverifiable = False

    def remove(self, raw: str, reason: str) -> None:
        raw = raw.strip().strip("[]").split("#", 1)[0]
        if raw not in self._reported:
            self._reported.add(raw)
            self.report.removed.append(RemovedCitation(source_id=raw, reason=reason))

    def _support(self, claim: str, sid: str) -> Support | None:
        if self.checker is None:
            return None
        return self.checker.check(claim, sid, self.ctx.retrieved[sid], self.question)

    @property
    def question(self) -> str:
        """The run's question (its numbers are no claim of the answer's), or ``""``."""
        profile = self.ctx.profile
        return profile.question if profile is not None else ""

    def attach(self, claim: str, preferred: list[str]) -> tuple[str, Support] | None:
        """The retrieved section that best supports ``claim``, if one does.

        Sections the answer already cites (``preferred``) are tried first, then every section
        retrieved in the run in evidence-number order; lexical support is tried on all of
        them before the (costlier) semantic check, which only looks at the first
        :data:`ATTACH_SEMANTIC_CANDIDATES`.
        """
        if self.checker is None:
            return None
        if len(set(terms(claim))) < MIN_CLAIM_TERMS:
            return None  # too short to tell which section it comes from
        order = list(dict.fromkeys([*preferred, *self.ctx.retrieved]))
        best: tuple[str, Support] | None = None
        lexical_only = SupportChecker(
            None, self.checker.lexical_threshold, multilingual=self.checker.multilingual
        )
        for sid in order:
            support = lexical_only.check(claim, sid, self.ctx.retrieved[sid], self.question)
            if support.supported and (best is None or support.lexical > best[1].lexical):
                best = (sid, support)
        if best is not None:
            return best
        for sid in order[:ATTACH_SEMANTIC_CANDIDATES]:
            support = self.checker.check(claim, sid, self.ctx.retrieved[sid], self.question)
            if support.supported and (best is None or support.score > best[1].score):
                best = (sid, support)
        return best

    def sentence(self, sentence: str) -> tuple[str, str, bool]:
        """(rewritten sentence, its claim, whether any citation supports it).

        :attr:`unverifiable` tells afterwards whether a cited section could not check it.
        """
        claim = _tidy(_MARKER.sub("", sentence))
        results: dict[str, Support | None] = {}
        self.unverifiable = False

        def fix(match: re.Match[str]) -> str:
            ids = []
            for raw in _ID_SEPARATOR.split(match.group(1)):
                sid, reason = self.resolver.resolve(raw)
                if sid is None:
                    self.remove(raw, reason)
                    continue
                if sid not in results:
                    results[sid] = self._support(claim, sid)
                support = results[sid]
                if (support is None or support.supported) and sid not in ids:
                    ids.append(sid)
            return f"[{', '.join(ids)}]" if ids else ""

        rewritten = _tidy(_MARKER.sub(fix, sentence))
        grounded = False
        for sid, support in results.items():
            if support is not None and not support.supported:
                verdict = "unverifiable" if support.verdict == "unverifiable" else "unsupported"
                self.unverifiable = self.unverifiable or verdict == "unverifiable"
                self.report.unsupported.append(
                    UnsupportedCitation(
                        source_id=sid,
                        sentence=claim,
                        lexical=round(support.lexical, 3),
                        semantic=None if support.semantic is None else round(support.semantic, 3),
                        reason=support.reason(),
                        verdict=verdict,
                    )
                )
                continue
            grounded = True
            score = support.score if support is not None else None
            best = self.cited.get(sid)
            if sid not in self.cited or (score is not None and (best is None or score > best)):
                self.cited[sid] = score
        return rewritten, claim, grounded


def section_citation(source_id: str, ctx: RunContext, support: float | None) -> Citation:
    """The citation of a section retrieved in this run: its evidence number, title, text
    (cut to :data:`CITATION_TEXT_CHARS`) and ``support`` (rounded to 3 places; ``None``:
    unchecked).

    Raises:
        KeyError: ``source_id`` was not retrieved in this run.
    """
    chunks = ctx.retrieved[source_id]
    return Citation(
        source_id=source_id,
        number=ctx.numbers.get(source_id),
        title=chunks[0].heading if chunks else "",
        text=join_parts(chunks)[:CITATION_TEXT_CHARS],
        support=None if support is None else round(support, 3),
    )


def _with_marker(sentence: str, source_id: str) -> str:
    """``sentence`` with ``[source_id]`` placed before its final punctuation."""
    body = sentence.rstrip()
    end = ""
    while body and body[-1] in ".!?;:":
        end = body[-1] + end
        body = body[:-1]
    return f"{body.rstrip()} [{source_id}]{end}"


def validate_citations(
    draft: AnswerDraft,
    ctx: RunContext,
    checker: SupportChecker | None = None,
    strict_grounding: bool = False,
) -> CitationReport:
    """Check a draft's citations sentence by sentence (see the module docstring).

    Args:
        draft: the reasoner's proposed answer.
        ctx: the run's context: ``retrieved`` (``source_id`` → chunks) and ``numbers``.
        checker: the support check; ``None`` checks only that cited sections were retrieved.
        strict_grounding: drop sentences left without a supporting citation.

    Returns:
        The validated answer (citations in order of first mention, each with its evidence
        number, best support score and the section's text) and what was removed, flagged or
        dropped. An "insufficient context" draft keeps no citations and is not checked for
        support.
    """
    insufficient = draft.is_insufficient_context
    checks = _SentenceChecker(ctx, checker, check=not insufficient)
    report = checks.report
    ungrounded: list[str] = []
    lines: list[str] = []
    text = clean_answer_text(draft.answer_text)
    preferred = [sid for sid in (checks.resolver.resolve(r)[0] for r in cited_ids(text)) if sid]
    for sentence, reason in ctx.withheld.items():  # kept out of the extractive answer
        report.withhold(sentence, reason)
    for line in split_sentences(text):
        kept = []
        for sentence in line:
            reason = unsafe_reason(_MARKER.sub("", sentence))
            if reason is not None:
                report.withhold(_tidy(_MARKER.sub("", sentence)), reason)
                continue
            rewritten, claim, grounded = checks.sentence(sentence)
            unverifiable = checks.unverifiable
            if not grounded and not insufficient and claim and not claim.endswith("?"):
                found = checks.attach(claim, preferred)
                if found is not None:
                    sid, support = found
                    before = [u.source_id for u in report.unsupported if u.sentence == claim]
                    report.added.append(
                        AddedCitation(
                            source_id=sid,
                            sentence=claim,
                            support=round(support.score, 3),
                            replaced=before,
                        )
                    )
                    rewritten = _with_marker(rewritten, sid)
                    grounded = True
                    checks.cited.setdefault(sid, support.score)
            if not grounded and not insufficient and claim and not claim.endswith("?"):
                if unverifiable:
                    report.unverifiable.append(claim)
                if strict_grounding:
                    report.dropped_sentences.append(claim)
                    continue
                ungrounded.append(claim)
            if rewritten:
                kept.append(rewritten)
        lines.append(" ".join(kept))
    for raw in draft.citations:  # ids listed without a marker in the text
        sid, reason = checks.resolver.resolve(raw)
        if sid is None:
            checks.remove(raw, reason)
        elif sid not in checks.cited and not strict_grounding:
            checks.cited[sid] = None
    citations = []
    if not insufficient:
        for sid, score in checks.cited.items():
            citations.append(section_citation(sid, ctx, score))
    report.answer = GeneratedAnswer(
        answer_text=re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(),
        key_points=[
            _resolve_markers(p, checks.resolver)
            for p in draft.key_points
            if p.strip() and unsafe_reason(p) is None
        ],
        citations=citations,
        is_insufficient_context=insufficient,
        ungrounded_sentences=ungrounded,
    )
    return report
