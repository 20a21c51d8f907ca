"""Document expansion by query prediction (doc2query): the questions a section answers.

A user asks in everyday words ("Can I be jailed for taking someone's bag?"); a statute says
"Whoever, intending to take dishonestly any movable property …". Neither BM25 nor the bundled
embedding model bridges that gap. At ingest, the configured model reads each section once and
writes a few questions a person without the field's vocabulary might ask that the section
answers; they are stored with the section's chunks (``Chunk.metadata["doc2query"]``) and join
the text that BM25, the embedder and the cross-encoder see (:meth:`Chunk.index_text`), never
the evidence a reader quotes or the support check reads (:meth:`Chunk.passage_text`).

Source: Nogueira, Yang, Lin & Cho, "Document Expansion by Query Prediction" (2019,
arXiv:1904.08375) and Nogueira & Lin, "From doc2query to docTTTTTquery" (2019), where the
predicted queries are appended to the document before indexing. Here the predictor is the
configured instruction-tuned model, prompted, not a fine-tuned seq2seq model.

Generation costs one model call per section (~3.5 s with the bundled 1.5B model on 2 cores),
so the questions are cached by the model, the prompt and the passage
(:class:`QuestionCache`, ``<data_dir>/doc2query.sqlite3``): ingesting the same text again, into
this or another collection, asks the model nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sleuth.config import Settings
from sleuth.errors import ConfigError
from sleuth.types import Chunk

logger = logging.getLogger(__name__)

CACHE_FILE = "doc2query.sqlite3"
"""The question cache, under the data dir."""
PROMPT_VERSION = 1
"""Part of every cache key: a changed prompt never reuses questions written for the old one."""
PASSAGE_CHARS = 700
"""The model reads a section's heading and its first this many characters (the opening of a
section states what it is about; ~200 tokens keep a call near 3.5 s on 2 cores)."""
MAX_TOKENS = 30
"""Output tokens allowed per question asked for."""
PROMPT = (
    "Statute section:\n{heading}\n{passage}\n\n"
    "Write {n} different questions that a person with no legal training might ask, in "
    "everyday words, whose answer is in this section. Do not mention the section, its number "
    "or the Act. One question per line, no numbering."
)
"""The instruction (kept general: "statute" fits the acts sleuth is built for, and the model
reads any section the same way)."""

_NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)])\s*")

Ask = Callable[[str, int], str]
"""``(prompt, max_tokens) -> reply text``: one model call."""


def parse_questions(reply: str, n: int) -> list[str]:
    """The questions in a model's reply: one per line, list markers and numbering removed,
    lines that do not end with "?" (preambles, a line cut by the token limit) and repeats
    (case-insensitive) left out; at most ``n``."""
    out: list[str] = []
    seen: set[str] = set()
    for line in reply.splitlines():
        text = _NUMBERING.sub("", line).strip().strip('"').strip()
        if not text.endswith("?") or len(text) < 8 or text.lower() in seen:
            continue
        seen.add(text.lower())
        out.append(text)
        if len(out) >= n:
            break
    return out


class QuestionCache:
    """Questions already written, by (model, prompt version, n, heading, passage).

    A SQLite file (stdlib ``sqlite3``, one table), safe to share between threads of one
    process; a cache that cannot be opened is a :class:`sqlite3.Error` for the caller.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        with self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS questions (key TEXT PRIMARY KEY, questions TEXT)"
            )

    @staticmethod
    def key(model: str, n: int, heading: str, passage: str) -> str:
        raw = json.dumps([PROMPT_VERSION, model, n, heading, passage])
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def get(self, key: str) -> list[str] | None:
        with self._lock:
            row = self._db.execute("SELECT questions FROM questions WHERE key = ?", (key,))
            found = row.fetchone()
        return list(json.loads(found[0])) if found else None

    def put(self, key: str, questions: Sequence[str]) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO questions (key, questions) VALUES (?, ?)",
                (key, json.dumps(list(questions))),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


class QuestionWriter:
    """Writes (or reads from the cache) the questions each section of a document answers.

    Args:
        ask: one model call (:data:`Ask`); see :func:`chat_ask`.
        model: the model's name, part of the cache key.
        n: questions per section (1–10).
        cache: where written questions are kept; ``None``: not kept.

    Raises:
        ValueError: ``n`` outside 1–10.
    """

    def __init__(self, ask: Ask, model: str, n: int, cache: QuestionCache | None) -> None:
        if not 1 <= n <= 10:
            raise ValueError(f"doc2query: questions per section must be 1-10, got {n}")
        self.ask = ask
        self.model = model
        self.n = n
        self.cache = cache
        self.written = 0
        self.cached = 0

    def questions(self, heading: str, text: str) -> list[str]:
        """The questions for one section (its heading and the text of its first chunk)."""
        passage = text[:PASSAGE_CHARS]
        key = QuestionCache.key(self.model, self.n, heading, passage)
        if self.cache is not None:
            known = self.cache.get(key)
            if known is not None:
                self.cached += 1
                return known
        prompt = PROMPT.format(heading=heading, passage=passage, n=self.n)
        found = parse_questions(self.ask(prompt, MAX_TOKENS * self.n), self.n)
        self.written += 1
        if self.cache is not None:
            self.cache.put(key, found)
        return found

    def expand(self, chunks: Sequence[Chunk]) -> None:
        """Put each section's questions in ``metadata["doc2query"]`` of all its chunks
        (in place; a section whose model call fails keeps none, logged)."""
        sections: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            sections.setdefault(chunk.source_id, []).append(chunk)
        for parts in sections.values():
            first = min(parts, key=lambda c: c.part)
            heading = first.title_path[-1] if first.title_path else ""
            try:
                found = self.questions(heading, first.text)
            except Exception as exc:  # a model fault costs one section its questions only
                logger.warning("doc2query: no questions for %s: %s", first.source_id, exc)
                continue
            for chunk in parts:
                chunk.metadata["doc2query"] = list(found)


def chat_ask(model: Any) -> Ask:
    """An :data:`Ask` over a LangChain chat model (one user turn, ``max_tokens`` bound)."""
    from langchain_core.messages import HumanMessage

    def ask(prompt: str, max_tokens: int) -> str:
        reply = model.invoke([HumanMessage(content=prompt)], max_tokens=max_tokens)
        content = reply.content
        return content if isinstance(content, str) else str(content)

    return ask


def build_question_writer(settings: Settings) -> QuestionWriter:
    """The writer ``settings.doc2query`` asks for, over the configured model.

    Raises:
        ConfigError: no model is configured (``SLEUTH_LLM=heuristic``), and the errors of
            :func:`~sleuth.llm.factory.make_chat_model`.
    """
    from sleuth.llm.factory import make_chat_model

    model = make_chat_model(settings)
    if model is None:
        raise ConfigError(
            f"doc2query ({settings.doc2query} questions per section) needs a model to write "
            "them: set SLEUTH_LLM (e.g. 'local'), or set SLEUTH_DOC2QUERY=0"
        )
    path = getattr(model, "model_path", None)
    name = Path(str(path)).name if path else settings.llm
    cache = QuestionCache(settings.data_dir / CACHE_FILE)
    return QuestionWriter(chat_ask(model), name, settings.doc2query, cache)
