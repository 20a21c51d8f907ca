"""Lexical helpers shared by the heuristic reasoner and the citation checks.

Terms are lower-cased word tokens minus English stop words (bm25s's list), stemmed with the
Snowball English stemmer (PyStemmer), so they match what the BM25 index sees.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from bm25s.stopwords import STOPWORDS_EN

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[\"'(\[]?[A-Z0-9(])|\n{2,}|\n(?=\(\w{1,4}\)\s)")

QUESTION_WORDS = frozenset(
    [
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "does",
        "do",
        "did",
        "is",
        "are",
        "was",
        "were",
        "can",
        "could",
        "should",
        "would",
        "shall",
        "may",
        "might",
        "must",
        "tell",
        "explain",
        "describe",
        "know",
        "say",
        "says",
        "said",
        "law",
        "laws",
        "provide",
        "provides",
        "provided",
        "prescribe",
        "prescribes",
        "prescribed",
        "mean",
        "means",
        "meaning",
        "under",
        "regarding",
        "concerning",
        "about",
        "according",
        "give",
        "list",
        "there",
        # words that frame a question rather than name its subject
        "happen",
        "happens",
        "someone",
        "somebody",
        "anyone",
        "step",
        "steps",
        "follow",
        "file",
        "consequence",
        "consequences",
        # quantifiers that frame a comparison ("are X and Y both ...?")
        "both",
        "either",
        "neither",
    ]
)
STOPWORDS = frozenset(STOPWORDS_EN) | QUESTION_WORDS


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (letters, digits, inner ' _ -)."""
    return [w.lower().strip("'-_") for w in _WORD.findall(text)]


def terms(text: str) -> list[str]:
    """Stemmed content terms of ``text``, in order, stop words and question words removed."""
    return [_stem(w) for w in words(text) if w and w not in STOPWORDS and len(w) > 1]


MIN_QUERY_TERMS = 2
"""Content terms a follow-up query needs to be worth running (one generic word such as
"year" or "from" matches everything)."""


def novel_query(query: str, earlier: Sequence[str], min_terms: int = MIN_QUERY_TERMS) -> bool:
    """Whether a follow-up search for ``query`` could find something new.

    False when it has fewer than ``min_terms`` content terms (one is enough for a whole
    missing part of a question, "theft"; not for a left-over word), or when its terms are a
    subset of an earlier query's (a repeat, or a shorter form of one: BM25 and the dense
    model would rank the same sections again).
    """
    own = set(terms(query))
    if len(own) < max(min_terms, 1):
        return False
    return not any(own <= set(terms(q)) for q in earlier)


def key_phrase(question: str) -> str:
    """The question without question words and stop words, for a keyword search."""
    kept = [w for w in words(question) if w not in STOPWORDS]
    return " ".join(kept) or question.strip()


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (also at numbered clauses like ``(2)``); strips blanks."""
    parts = _SENTENCE_END.split(text.replace("\r\n", "\n"))
    return [" ".join(p.split()) for p in parts if p and p.strip()]


def coverage(question_terms: set[str], text: str) -> float:
    """Share of ``question_terms`` present in ``text``'s terms, in [0, 1].

    0.0 for a question without terms ("?", emoji, a script the tokenizer does not read):
    nothing in it can be found, so nothing covers it.
    """
    if not question_terms:
        return 0.0
    return len(question_terms & set(terms(text))) / len(question_terms)
