"""doc2query at ingest: questions written per section, cached, indexed, never evidence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agents.support import SupportChecker
from sleuth.config import Settings
from sleuth.errors import ConfigError, UserError
from sleuth.eval.datasets import EvalDataset
from sleuth.eval.runner import prepare_collection
from sleuth.ingest.doc2query import (
    PASSAGE_CHARS,
    QuestionCache,
    QuestionWriter,
    build_question_writer,
    parse_questions,
)
from sleuth.ingest.pipeline import IngestPipeline
from sleuth.store.catalog import Catalog
from sleuth.store.index import Index
from sleuth.store.local_index import LocalIndex
from sleuth.types import Chunk
from tests.unit.test_pipeline import FakeEmbedder

HARBOUR = (
    "# Harbour Code\n\n"
    "## Section 4. Mooring dues\n\n"
    "A vessel moored at a public quay for more than six hours shall pay mooring dues "
    "of forty marks for each day or part of a day.\n\n"
    "## Section 5. Salvage\n\n"
    "Whoever recovers a derelict vessel is entitled to one third of its value as salvage.\n"
)


class ScriptedAsk:
    """A model double: answers by the heading in the prompt, records every prompt."""

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.prompts: list[tuple[str, int]] = []

    def __call__(self, prompt: str, max_tokens: int) -> str:
        self.prompts.append((prompt, max_tokens))
        for heading, reply in self.replies.items():
            if heading in prompt:
                return reply
        raise RuntimeError("the model is down")


REPLIES = {
    "Mooring dues": "1. How much do I pay to leave my boat at the dock overnight?\n"
    "2) Is there a charge for tying up a boat?\nSure, here you go",
    "Salvage": "- Do I get a reward for bringing in an abandoned ship?",
}


def test_parse_questions_strips_numbering_and_drops_non_questions() -> None:
    reply = (
        "Here are three questions:\n1. Can my dog be taken away?\n"
        '2) "Who pays the fine?"\n- Can my dog be taken away?\n• Is it legal to\n'
        "3. What if the owner is away?"
    )
    assert parse_questions(reply, 3) == [
        "Can my dog be taken away?",
        "Who pays the fine?",
        "What if the owner is away?",
    ]
    assert parse_questions(reply, 1) == ["Can my dog be taken away?"]


def test_writer_caches_by_passage_and_model(tmp_path: Path) -> None:
    ask = ScriptedAsk(REPLIES)
    cache = QuestionCache(tmp_path / "q.sqlite3")
    writer = QuestionWriter(ask, "model-a", 2, cache)
    first = writer.questions("Section 4. Mooring dues", "A vessel moored …")
    assert first == [
        "How much do I pay to leave my boat at the dock overnight?",
        "Is there a charge for tying up a boat?",
    ]
    assert ask.prompts[0][1] == 60  # 30 output tokens per question asked for
    again = QuestionWriter(ask, "model-a", 2, cache).questions(
        "Section 4. Mooring dues", "A vessel moored …"
    )
    assert again == first and len(ask.prompts) == 1
    # another model, or another passage, asks the model again
    QuestionWriter(ask, "model-b", 2, cache).questions("Section 4. Mooring dues", "A vessel …")
    writer.questions("Section 4. Mooring dues", "A vessel moored at a quay …")
    assert len(ask.prompts) == 3
    # the model reads at most PASSAGE_CHARS of the section
    writer.questions("Section 4. Mooring dues", "x" * (PASSAGE_CHARS + 50))
    assert "x" * PASSAGE_CHARS in ask.prompts[-1][0]
    assert "x" * (PASSAGE_CHARS + 1) not in ask.prompts[-1][0]
    cache.close()


def test_writer_rejects_a_bad_count() -> None:
    with pytest.raises(ValueError, match="1-10"):
        QuestionWriter(ScriptedAsk({}), "m", 0, None)


def _chunk(source_id: str, part: int, text: str, title: str) -> Chunk:
    return Chunk(
        chunk_id=f"{source_id}#{part}",
        source_id=source_id,
        doc_id="harbour",
        title_path=["Harbour Code", title],
        text=text,
        position=part,
        part=part,
    )


def test_expand_gives_every_part_its_sections_questions_and_survives_a_model_fault() -> None:
    chunks = [
        _chunk("HC_S4", 0, "A vessel moored …", "Section 4. Mooring dues"),
        _chunk("HC_S4", 1, "… each day or part of a day.", "Section 4. Mooring dues"),
        _chunk("HC_S9", 0, "The harbour master may …", "Section 9. Harbour master"),
    ]
    ask = ScriptedAsk(REPLIES)
    QuestionWriter(ask, "m", 3, None).expand(chunks)
    assert len(ask.prompts) == 2  # one call per section, not per chunk
    assert chunks[0].metadata["doc2query"] == chunks[1].metadata["doc2query"]
    assert "questions" not in chunks[2].metadata  # the model failed on it: no questions


def test_questions_join_the_index_text_but_not_the_passage() -> None:
    chunk = _chunk("HC_S4", 0, "A vessel moored at a public quay …", "Section 4. Mooring dues")
    assert chunk.index_text() == chunk.passage_text()
    chunk.metadata["doc2query"] = ["Do I pay to leave my boat at the dock?"]
    heading, asked, body = chunk.index_text().split("\n", 2)
    assert heading == "Harbour Code > Section 4. Mooring dues"
    assert asked == "Do I pay to leave my boat at the dock?"
    assert body == chunk.text
    assert "boat" not in chunk.passage_text()


class Stored:
    """The index's stored vectors: these would embed the index text (questions too)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, ids: list[str]) -> dict[str, object]:
        self.asked.extend(ids)
        return {}


def test_support_reads_the_passage_not_the_questions() -> None:
    embedder = FakeEmbedder()
    stored = Stored()
    checker = SupportChecker(embedder=embedder, stored=stored)  # type: ignore[arg-type]
    plain = _chunk("HC_S5", 0, "Whoever recovers a derelict vessel …", "Section 5. Salvage")
    asked = _chunk("HC_S4", 0, "A vessel moored at a public quay …", "Section 4. Mooring dues")
    asked.metadata["doc2query"] = ["Do I pay to leave my boat at the dock?"]
    checker._semantic("You pay to leave a boat at the dock.", [plain, asked])
    assert stored.asked == ["HC_S5#0"]  # a stored vector embeds the questions: not used
    assert "Do I pay to leave my boat at the dock?" not in " ".join(embedder.inputs)
    assert asked.passage_text() in embedder.inputs


class PipelineEnv:
    def __init__(self, root: Path, writer: QuestionWriter | None) -> None:
        self.settings = Settings(
            data_dir=root / "data", embedding_model="fake-embedder", _env_file=None
        )
        self.catalog = Catalog(self.settings.catalog_url)
        self.indexes: dict[str, LocalIndex] = {}
        self.doc = root / "harbour.md"
        self.doc.write_text(HARBOUR, encoding="utf-8")
        self.writer = writer

    def opener(self, settings: Settings, collection: str, dim: int) -> Index:
        if collection not in self.indexes:
            self.indexes[collection] = LocalIndex(settings.data_dir / "idx" / collection, dim)
        return self.indexes[collection]

    def pipeline(self, writer: QuestionWriter | None) -> IngestPipeline:
        return IngestPipeline(
            self.settings,
            self.catalog,
            index_opener=self.opener,
            embedder=FakeEmbedder(),
            question_writer=writer,
        )


@pytest.fixture
def penv(tmp_path: Path) -> Iterator[PipelineEnv]:
    e = PipelineEnv(tmp_path, None)
    yield e
    e.catalog.close()


def test_ingest_indexes_the_questions_and_keeps_them_in_the_catalog(penv: PipelineEnv) -> None:
    plain = penv.pipeline(None)
    plain.ingest([penv.doc], "c")
    index = penv.indexes["c"]
    assert index.search_bm25("reward abandoned ship", 5) == []  # the body lacks these words
    ask = ScriptedAsk(REPLIES)
    expanding = penv.pipeline(QuestionWriter(ask, "m", 3, None))
    report = expanding.ingest([penv.doc], "c")
    # the same file, unchanged, is indexed again because its chunks lack questions
    assert [f.status for f in report.files] == ["replaced"]
    assert "indexed again with doc2query questions" in report.files[0].message
    assert report.questions_written == 2 and report.timings.doc2query_s >= 0
    hits = index.search_bm25("reward abandoned ship", 5)
    assert hits and hits[0].chunk.text.startswith("Whoever recovers a derelict vessel")
    assert "reward" not in hits[0].chunk.text  # the evidence is the section's own text
    stored = penv.catalog.chunks_for_source("c", hits[0].chunk.source_id)
    assert stored[0].metadata["doc2query"] == [
        "Do I get a reward for bringing in an abandoned ship?"
    ]
    # once they are there, the file is unchanged again: no model call
    again = expanding.ingest([penv.doc], "c")
    assert [f.status for f in again.files] == ["unchanged"] and len(ask.prompts) == 2


def test_a_section_the_model_wrote_no_question_for_is_not_asked_again(penv: PipelineEnv) -> None:
    ask = ScriptedAsk({"Mooring dues": "I cannot help with that.", "Salvage": "No idea."})
    expanding = penv.pipeline(QuestionWriter(ask, "m", 3, None))
    expanding.ingest([penv.doc], "c")
    assert len(ask.prompts) == 2
    again = expanding.ingest([penv.doc], "c")
    assert [f.status for f in again.files] == ["unchanged"] and len(ask.prompts) == 2


def test_doc2query_without_a_model_is_a_clear_config_error(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, llm="heuristic", doc2query=3, _env_file=None)
    with pytest.raises(ConfigError, match=r"needs a model.*SLEUTH_LLM"):
        build_question_writer(settings)


def test_an_expanded_eval_collection_never_reuses_the_plain_one(tmp_path: Path) -> None:
    class NoCollections:
        def get_collection(self, name: str) -> None:
            return None

    class App:
        def __init__(self, doc2query: int) -> None:
            self.settings = Settings(data_dir=tmp_path, doc2query=doc2query, _env_file=None)
            self.catalog = NoCollections()

    dataset = EvalDataset(name="x", questions=(), collection="eval_x")
    with pytest.raises(UserError, match="'eval_x' does not exist"):
        prepare_collection(App(0), dataset)
    with pytest.raises(UserError, match="'eval_x_d2q3' does not exist"):
        prepare_collection(App(3), dataset)
