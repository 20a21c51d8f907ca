"""Does a cited chunk support the sentence that cites it?

A claim (one sentence of an answer, its citation markers removed) is *supported* by a cited
section when either

* **lexical support** — the share of the claim's content terms (stemmed, stop words removed:
  :func:`sleuth.retrieval.text.terms`) found in the section's title and text — reaches
  :data:`LEXICAL_THRESHOLD`, or
* **semantic support** — checked only when the lexical test fails — either, with a
  cross-encoder (:mod:`sleuth.retrieval.rerank`, the default when reranking is on), the
  highest probability it gives a (claim, chunk) pair of the section reaching
  :data:`CROSS_ENCODER_THRESHOLD`, or, without one, the highest cosine similarity between the
  claim's embedding and the embeddings of the section's chunks reaching
  :data:`SEMANTIC_THRESHOLD`. The cross-encoder reads claim and passage together, so a
  paraphrase or a number written in words is judged by meaning, not shared words.

A claim that states a number its section does not (in digits or in words: "seven years" is
"7 years"; a section number, a year, a term of days or an amount) is never supported, however
many words it shares: a wrong number is the commonest way a small model's paraphrase of a
rule goes wrong, and the one a reader cannot tell by its words.

A claim with fewer than :data:`MIN_CLAIM_TERMS` content terms ("1998.", "Hello there.") is
held to more: lexical support needs *all* of its terms in the section (one shared word of
two is no evidence), else the semantic test decides. Some claims cannot be checked at all,
and are *unverifiable* (:attr:`Support.verdict`), which is never supported:

* a claim without content terms ("Yes.", "Ok!", only stop words or punctuation);
* a claim the lexical test does not support whose letters are mostly not Latin (Hindi,
  Chinese, Russian…), when the semantic model reads English only (all-MiniLM-L6-v2, the
  default): its cosine with an English section means nothing. A non-Latin claim a section
  of its own language supports lexically is supported.

The lexical and cosine thresholds were chosen on the statutes data with
``bench/bench_citation_support.py``: claims are the sentences of the 996 reference answers
of ``synthetic_qa.json``, positives pair a claim with its gold section, negatives with the
best-ranked *other* section a hybrid search finds for the claim (hard) and with a random
section (easy); the output in
``bench/README.md`` gives the true/false positive rates at each threshold.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

import numpy as np

from sleuth.ingest.references import SOURCE_ID_TOKEN
from sleuth.retrieval.embeddings import Embedder
from sleuth.retrieval.rerank import CrossEncoder, sigmoid
from sleuth.retrieval.text import digits, latin_share, terms
from sleuth.types import Chunk

if TYPE_CHECKING:
    from sleuth.agents.coverage import CoverageJudge

LEXICAL_THRESHOLD = 0.7
"""Share of a claim's content terms that must occur in the cited section."""
SEMANTIC_THRESHOLD = 0.65
"""Cosine similarity (all-MiniLM-L6-v2) between the claim and a chunk of the section."""
CROSS_ENCODER_THRESHOLD = 0.5
"""Sigmoid of the cross-encoder's logit: 0.5 is the model's own decision boundary (logit 0,
as trained on ms-marco relevance labels), not a value fitted to sleuth's data."""
MIN_CLAIM_TERMS = 2
"""Claims with fewer content terms ("1998.") are lexically supported only when all of them
occur in the section."""
MIN_LATIN_SHARE = 0.5
"""A claim with a smaller share of Latin letters is unreadable for an English-only
semantic model."""
Verdict = Literal["supported", "unsupported", "unverifiable"]
ANSWER_WORDS = frozenset(["yes", "no", "true", "fals", "correct", "incorrect", "ok", "okay"])
"""Stems of words that answer rather than claim ("Yes."): not content terms of a claim."""

_NUMBERED = re.compile(r"^\s*(?:[-*•]|\(?\d{1,3}[.)])\s+")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_LABEL = re.compile(r"\(\d+[A-Za-z]?\)")
"""A sub-section or clause label, "(6)" or "(2A)": a place in the text, not a quantity."""
_PLACE = re.compile(
    r"(?i:\b(?:sub-)?(?:section|clause|explanation|illustration|chapter|schedule|article|rule"
    r"|paragraph|form)s?\s+\d+[A-Z]?\b(?:\s*(?:,|and|or|to)\s*\d+[A-Z]?\b)*)"
)
"""A part of a text named with its number ("section 64", "Explanation 2", "sections 39 to
41"): its number is a place, not a quantity."""


@dataclass(frozen=True)
class Support:
    """The support check of one (claim, cited section) pair.

    Attributes:
        source_id: the cited section.
        lexical: share of the claim's terms found in the section, in [0, 1].
        semantic: best claim-chunk cosine in [-1, 1] (or cross-encoder probability in
            (0, 1)), or ``None`` when not computed.
        supported: whether either score reaches its threshold (``verdict == "supported"``).
        checked: ``False`` when the claim had no content terms (nothing to test).
        verdict: ``"supported"``, ``"unsupported"``, or ``"unverifiable"`` (no content
            terms, or a script the semantic model cannot read; never supported).
        threshold: the semantic threshold it was held to.
    """

    source_id: str
    lexical: float
    semantic: float | None
    supported: bool
    checked: bool = True
    verdict: Verdict = "unsupported"
    threshold: float = SEMANTIC_THRESHOLD
    missing_numbers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.supported and self.verdict != "supported":
            object.__setattr__(self, "verdict", "supported")
        elif not self.supported and self.verdict == "supported":
            object.__setattr__(self, "verdict", "unsupported")

    @property
    def score(self) -> float:
        """The stronger of the two scores (the semantic one when it was computed and higher)."""
        return max(self.lexical, self.semantic if self.semantic is not None else 0.0)

    def reason(self) -> str:
        """Why the pair failed, in words, e.g. ``"lexical 0.25 < 0.6, semantic 0.41 < 0.6"``."""
        if self.verdict == "unverifiable":
            if not self.checked:
                return "the sentence cannot be checked: it has no content words"
            return (
                f"the sentence cannot be checked: lexical {self.lexical:.2f} < "
                f"{LEXICAL_THRESHOLD} and the semantic model does not read its script"
            )
        if self.missing_numbers:
            return (
                "the section does not state the number(s) the sentence gives ("
                + ", ".join(self.missing_numbers)
                + ")"
            )
        parts = [f"lexical {self.lexical:.2f} < {LEXICAL_THRESHOLD}"]
        if self.semantic is not None:
            parts.append(f"semantic {self.semantic:.2f} < {self.threshold}")
        return "the section does not support the sentence (" + ", ".join(parts) + ")"


@lru_cache(maxsize=4096)
def _plain(text: str) -> str:
    """``text`` in digits (:func:`~sleuth.retrieval.text.digits`) without its sub-section
    labels and citation ids: neither states a number. Cached: :func:`numbers` and
    :func:`places` both read it, and ``alpha2digit`` is the slow part."""
    return _LABEL.sub(" ", SOURCE_ID_TOKEN.sub(" ", digits(text)))


def _numbers_in(text: str) -> frozenset[str]:
    return frozenset(n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text))


@lru_cache(maxsize=4096)
def numbers(text: str) -> frozenset[str]:
    """The quantities ``text`` states, in digits whichever way they are written ("seven
    years", "7 years" → ``"7"``; "5,000" → ``"5000"``). Places state none: sub-section labels
    ("(6) Notwithstanding …"), numbered parts (:data:`_PLACE`: "Explanation 2", "section
    64") and citation ids ("BNS_S229") — or "up to 6 hours" would pass against any section
    with six sub-sections, and "two years" against any with a second explanation. Cached: a
    run checks many claims against the same few sections."""
    return _numbers_in(_PLACE.sub(" ", _plain(text)))


@lru_cache(maxsize=4096)
def places(text: str) -> frozenset[str]:
    """The numbers of the parts ``text`` names (:data:`_PLACE`: "section 64", "sections 39 to
    41" → ``{"64"}``, ``{"39", "41"}``)."""
    return frozenset(n for m in _PLACE.finditer(_plain(text)) for n in _numbers_in(m.group(0)))


def claim_text(sentence: str) -> str:
    """A sentence stripped of list bullets and numbering, for scoring."""
    return _NUMBERED.sub("", sentence).strip()


SUPPORT_CHUNKS = 16
"""Chunks of one cited section a claim is scored against by a model at most: a statute
section has one to a few; a section of thousands of chunks (a 3 MB table) would cost the
cross-encoder minutes per claim."""


def likeliest_chunks(claim_terms: set[str], chunks: Sequence[Chunk]) -> Sequence[Chunk]:
    """The :data:`SUPPORT_CHUNKS` chunks sharing the most of ``claim_terms`` (ties in
    section order), or all of them when there are no more than that."""
    if len(chunks) <= SUPPORT_CHUNKS:
        return chunks
    shared = [len(claim_terms & set(terms(c.text))) for c in chunks]
    best = sorted(range(len(chunks)), key=lambda i: -shared[i])[:SUPPORT_CHUNKS]
    return [chunks[i] for i in sorted(best)]


class SupportChecker:
    """Scores claims against cited sections (see the module docstring for the rule).

    Args:
        embedder: the collection's embedding model (vectors L2-normalised, shape
            ``(n, dim)``); ``None`` checks lexically only.
        lexical_threshold: see :data:`LEXICAL_THRESHOLD`.
        semantic_threshold: see :data:`SEMANTIC_THRESHOLD`.
        multilingual: the embedder reads every script; ``False`` (the default, for
            all-MiniLM-L6-v2) makes claims mostly in other scripts than Latin unverifiable
            when the lexical test fails.
        stored: the vectors the index already holds for chunks (``chunk_id`` → the
            embedding of ``Chunk.index_text()`` by the same model), e.g.
            :meth:`~sleuth.retrieval.search.KnowledgeBase.chunk_vectors` of the run's
            collection; chunks it does not return are embedded.
        cross_encoder: scores semantic support instead of the embedder when given.
        cross_encoder_threshold: see :data:`CROSS_ENCODER_THRESHOLD`.
        coverage_threshold: the least cross-encoder relevance to the question of some
            sentence of the cited sections for an answer to stand
            (:func:`~sleuth.agents.finish.off_topic`; 0: not checked).
        coverage_judge: the model's judgement of coverage
            (:class:`~sleuth.agents.coverage.CoverageJudge`), asked when the cross-encoder
            finds the sections unrelated; ``None``: the cross-encoder's verdict stands.
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        lexical_threshold: float = LEXICAL_THRESHOLD,
        semantic_threshold: float = SEMANTIC_THRESHOLD,
        multilingual: bool = False,
        stored: Callable[[list[str]], dict[str, np.ndarray]] | None = None,
        cross_encoder: CrossEncoder | None = None,
        cross_encoder_threshold: float = CROSS_ENCODER_THRESHOLD,
        coverage_threshold: float = 0.0,
        coverage_judge: CoverageJudge | None = None,
    ) -> None:
        self.coverage_threshold = coverage_threshold
        self.coverage_judge = coverage_judge
        self.embedder = embedder
        self.cross_encoder = cross_encoder
        self.cross_encoder_threshold = cross_encoder_threshold
        self.stored = stored
        self.lexical_threshold = lexical_threshold
        self.semantic_threshold = semantic_threshold
        self.multilingual = multilingual
        self._vectors: dict[str, np.ndarray] = {}

    def check(
        self, claim: str, source_id: str, chunks: Sequence[Chunk], given: str = ""
    ) -> Support:
        """Check one claim against the chunks of one cited section (see the module
        docstring for the rule); the numbers of ``given`` (the question: "a six-year-old")
        count as stated."""
        claim = claim_text(claim)
        claim_terms = set(terms(claim)) - ANSWER_WORDS
        if not claim_terms:
            return Support(
                source_id, 0.0, None, supported=False, checked=False, verdict="unverifiable"
            )
        section_text = " ".join(
            dict.fromkeys([chunks[0].heading if chunks else "", *(c.text for c in chunks)])
        )
        lexical = len(claim_terms & set(terms(section_text))) / len(claim_terms)
        # a quantity must be one the section states; a part it names ("section 12"), one the
        # section states or names
        held = numbers(section_text) | numbers(given)
        missing = (numbers(claim) - held) | (
            places(claim) - held - places(section_text) - places(given)
        )
        if missing:
            return Support(
                source_id, lexical, None, supported=False, missing_numbers=tuple(sorted(missing))
            )
        needed = self.lexical_threshold if len(claim_terms) >= MIN_CLAIM_TERMS else 1.0
        if lexical >= needed:
            return Support(source_id, lexical, None, supported=True)
        if not self.readable(claim):
            return Support(source_id, lexical, None, supported=False, verdict="unverifiable")
        chunks = likeliest_chunks(claim_terms, chunks)
        if self.cross_encoder is not None and chunks:
            semantic = self.relevance(claim, chunks)
            return Support(
                source_id,
                lexical,
                semantic,
                supported=semantic >= self.cross_encoder_threshold,
                threshold=self.cross_encoder_threshold,
            )
        if self.embedder is None or not chunks:
            return Support(source_id, lexical, None, supported=False)
        semantic = self._semantic(claim, chunks)
        return Support(
            source_id,
            lexical,
            semantic,
            supported=semantic >= self.semantic_threshold,
            threshold=self.semantic_threshold,
        )

    def relevance(self, text: str, chunks: Sequence[Chunk]) -> float:
        """The cross-encoder's best probability, over ``chunks``, that a chunk supports or
        answers ``text`` (sigmoid of the logit, in (0, 1)).

        Raises:
            ValueError: no cross-encoder was given.
        """
        if self.cross_encoder is None:
            raise ValueError("relevance needs a cross-encoder")
        logits = self.cross_encoder.logits(text, [c.index_text() for c in chunks])
        return sigmoid(max(logits)) if logits else 0.0

    def readable(self, claim: str) -> bool:
        """Whether the semantic model can read ``claim``: always when it is multilingual,
        else when at least :data:`MIN_LATIN_SHARE` of its letters are Latin (or it has no
        letters: numbers, dates)."""
        if self.multilingual:
            return True
        share = latin_share(claim)
        return share is None or share >= MIN_LATIN_SHARE

    def _semantic(self, claim: str, chunks: Sequence[Chunk]) -> float:
        assert self.embedder is not None
        missing = [c for c in chunks if c.chunk_id not in self._vectors]
        if missing and self.stored is not None:
            self._vectors.update(self.stored([c.chunk_id for c in missing]))
            missing = [c for c in missing if c.chunk_id not in self._vectors]
        texts = [claim, *(c.index_text() for c in missing)]
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        for chunk, vector in zip(missing, vectors[1:], strict=True):
            self._vectors[chunk.chunk_id] = vector
        matrix = np.stack([self._vectors[c.chunk_id] for c in chunks])
        return float(np.max(matrix @ vectors[0]))
