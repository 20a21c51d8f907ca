"""The ingest pipeline with a fake embedder, a LocalIndex and a SQLite catalog in tmp_path."""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from sleuth.config import Settings
from sleuth.errors import EmbeddingModelMismatch, UserError
from sleuth.ingest import pipeline as pipeline_module
from sleuth.ingest.pipeline import IngestPipeline, IngestReport
from sleuth.ingest.progress import RichProgress
from sleuth.store.catalog import Catalog
from sleuth.store.index import Index
from sleuth.store.local_index import LocalIndex
from sleuth.types import Document, Section

DIM = 64


class FakeEmbedder:
    """Hashed bag of words, L2-normalised; records every text it is given."""

    def __init__(self, name: str = "fake-embedder", dim: int = DIM) -> None:
        self.name = name
        self.dim = dim
        self.calls = 0
        self.inputs: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.inputs.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else out[i]
        return out


class Recorder:
    def __init__(self) -> None:
        self.started: int | None = None
        self.files: list[tuple[str, str]] = []
        self.chunks: list[tuple[int, int]] = []

    def on_start(self, n_files: int) -> None:
        self.started = n_files

    def on_file(self, path: str, status: str) -> None:
        self.files.append((Path(path).name, status))

    def on_chunks(self, n_embedded: int, n_total: int) -> None:
        self.chunks.append((n_embedded, n_total))


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.docs = root / "docs"
        self.docs.mkdir()
        self.settings = Settings(
            data_dir=root / "data", embedding_model="fake-embedder", _env_file=None
        )
        self.catalog = Catalog(self.settings.catalog_url)
        self.embedder = FakeEmbedder()
        self.indexes: dict[str, LocalIndex] = {}
        self.pipeline = self.make_pipeline(self.embedder)

    def opener(self, settings: Settings, collection: str, dim: int) -> Index:
        if collection not in self.indexes:
            self.indexes[collection] = LocalIndex(settings.data_dir / "idx" / collection, dim)
        return self.indexes[collection]

    def make_pipeline(self, embedder: FakeEmbedder | None) -> IngestPipeline:
        return IngestPipeline(
            self.settings, self.catalog, index_opener=self.opener, embedder=embedder
        )

    def write(self, name: str, text: str | bytes) -> Path:
        path = self.docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    def index(self, collection: str = "c") -> LocalIndex:
        return self.indexes[collection]

    def texts_in_index(self, collection: str = "c") -> list[str]:
        """Every chunk text, via a dense search that ranks the whole index."""
        index = self.index(collection)
        n = index.count()
        if n == 0:
            return []
        probe = self.embedder.embed(["probe"])[0]
        self.embedder.calls -= 1
        self.embedder.inputs.pop()
        return [h.chunk.text for h in index.search_dense(probe, n)]

    def dense(self, query: str, k: int = 5, collection: str = "c") -> list[str]:
        vector = FakeEmbedder().embed([query])[0]
        return [h.chunk.text for h in self.index(collection).search_dense(vector, k)]

    def bm25(self, query: str, k: int = 5, collection: str = "c") -> list[str]:
        return [h.chunk.text for h in self.index(collection).search_bm25(query, k)]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.pipeline.close()
    e.catalog.close()


ZOO = (
    "# Zoo notes\n\nThe zebra grazes on the savanna.\n\n"
    "## Naming and binding\n\nNames refer to objects.\n"
)
BIRDS = "# Birds\n\nThe heron waits in the shallow water.\n"


def statuses(report: IngestReport) -> dict[str, str]:
    return {Path(f.path).name: f.status for f in report.files}


def test_ingest_adds_documents_and_reports(env: Env) -> None:
    env.write("zoo.md", ZOO)
    env.write("sub/birds.md", BIRDS)
    env.write("notes.xyz", "not a supported suffix: ignored inside a directory")
    env.write(".hidden/secret.md", "# Secret\n\nhidden\n")
    recorder = Recorder()
    report = env.pipeline.ingest([env.docs], "c", progress=recorder)

    assert statuses(report) == {"birds.md": "added", "zoo.md": "added"}
    assert report.totals["added"] == 2
    assert report.n_embedded == 3 == env.index().count()
    assert {f.doc_id: f.n_chunks for f in report.files} == {"birds": 1, "zoo": 2}
    t = report.timings
    assert t.total_s >= t.load_s + t.embed_s >= 0
    assert recorder.started == 2
    assert sorted(recorder.files) == [("birds.md", "added"), ("zoo.md", "added")]
    assert recorder.chunks[-1] == (3, 3)
    assert all(done <= total for done, total in recorder.chunks)

    info = env.catalog.get_collection("c")
    assert info is not None
    assert (info.embedding_model, info.dim, info.n_documents, info.n_chunks) == (
        "fake-embedder",
        DIM,
        2,
        3,
    )
    assert env.bm25("heron") == ["The heron waits in the shallow water."]
    assert env.dense("zebra grazes savanna")[0] == "The zebra grazes on the savanna."
    doc = env.catalog.get_document("c", "zoo")
    assert doc is not None
    assert Path(doc.path) == (env.docs / "zoo.md").resolve()


def test_empty_and_whitespace_files_are_skipped_never_embedded(env: Env) -> None:
    env.write("zoo.md", ZOO)
    env.write("empty.txt", "")
    env.write("blank.md", "  \n\t\n   \n")
    report = env.pipeline.ingest([env.docs], "c")

    assert statuses(report) == {"blank.md": "skipped", "empty.txt": "skipped", "zoo.md": "added"}
    assert any("empty.txt" in w for w in report.warnings)
    assert any("blank.md" in w for w in report.warnings)
    assert len(env.embedder.inputs) == 2  # the two sections of zoo.md, nothing else
    assert all("Zoo notes" in text for text in env.embedder.inputs)
    assert env.index().count() == 2
    assert {c.doc_id for c in env.index().get_chunks(["zoo#0"])} == {"zoo"}
    empty = env.catalog.get_document("c", "empty")
    assert empty is not None and empty.status == "skipped"


def test_reingest_unchanged_embeds_nothing(env: Env) -> None:
    env.write("zoo.md", ZOO)
    env.write("birds.md", BIRDS)
    first = env.pipeline.ingest([env.docs], "c")
    calls, count = env.embedder.calls, env.index().count()
    info = env.catalog.get_collection("c")
    docs = env.catalog.list_documents("c")

    second = env.pipeline.ingest([env.docs], "c")
    assert set(statuses(second).values()) == {"unchanged"}
    assert [f.n_chunks for f in second.files] == [f.n_chunks for f in first.files]
    assert env.embedder.calls == calls
    assert second.n_embedded == 0
    assert env.index().count() == count
    assert env.catalog.get_collection("c") == info
    assert env.catalog.list_documents("c") == docs  # not even rewritten (same updated_at)


def test_unchanged_reingest_does_not_load_the_model(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.write("zoo.md", ZOO)
    env.pipeline.ingest([env.docs], "c")

    def no_model(*args: object) -> None:
        raise AssertionError("the embedding model was loaded")

    monkeypatch.setattr(pipeline_module, "get_embedder", no_model)
    lazy = env.make_pipeline(embedder=None)
    report = lazy.ingest([env.docs], "c")
    assert statuses(report) == {"zoo.md": "unchanged"}


def test_edited_file_replaces_its_old_chunks(env: Env) -> None:
    path = env.write("zoo.md", ZOO)
    env.pipeline.ingest([path], "c")
    assert env.bm25("zebra")

    path.write_text(ZOO.replace("zebra grazes", "quokka smiles"), encoding="utf-8")
    report = env.pipeline.ingest([path], "c")
    assert statuses(report) == {"zoo.md": "replaced"}
    assert env.bm25("zebra") == []
    assert env.bm25("quokka") == ["The quokka smiles on the savanna."]
    assert env.dense("quokka smiles")[0] == "The quokka smiles on the savanna."
    assert not any("zebra" in t for t in env.texts_in_index())
    assert env.index().count() == 2
    (chunk,) = env.catalog.chunks_for_source("c", "zoo")
    assert "quokka" in chunk.text


def test_same_content_under_another_name_is_a_duplicate(env: Env) -> None:
    env.write("zoo.md", ZOO)
    env.pipeline.ingest([env.docs], "c")
    env.write("copy_of_zoo.md", ZOO)
    report = env.pipeline.ingest([env.docs], "c")

    assert statuses(report) == {"copy_of_zoo.md": "duplicate", "zoo.md": "unchanged"}
    (dup,) = report.by_status("duplicate")
    assert "'zoo'" in dup.message
    assert env.index().count() == 2
    assert env.catalog.get_document("c", "copy_of_zoo") is None


def test_corrupt_pdf_fails_by_name_and_the_batch_goes_on(env: Env) -> None:
    rng = np.random.default_rng(0)
    env.write("broken.pdf", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    env.write("zoo.md", ZOO)
    env.write("birds.md", BIRDS)
    report = env.pipeline.ingest([env.docs], "c")

    assert statuses(report) == {"birds.md": "added", "broken.pdf": "failed", "zoo.md": "added"}
    (failed,) = report.by_status("failed")
    assert failed.message.startswith("broken.pdf: ")
    assert "PDF" in failed.message
    assert not report.ok
    record = env.catalog.get_document("c", "broken")
    assert record is not None
    assert record.status == "failed" and record.error
    assert env.catalog.get_collection("c").n_failed == 1  # type: ignore[union-attr]
    assert env.index().count() == 3


def test_delete_removes_from_bm25_dense_and_catalog(env: Env) -> None:
    zoo = env.write("zoo.md", ZOO)
    env.write("birds.md", BIRDS)
    env.pipeline.ingest([env.docs], "c")

    assert env.pipeline.delete("c", "zoo") is True
    assert env.bm25("zebra") == []
    assert not any("zebra" in t for t in env.texts_in_index())
    assert env.catalog.get_document("c", "zoo") is None
    assert env.catalog.chunks_for_source("c", "zoo") == []

    env.pipeline.ingest([zoo], "c")
    assert env.pipeline.delete("c", zoo) is True  # by path
    assert env.bm25("zebra") == []
    assert env.index().count() == 1

    with pytest.raises(UserError, match="no document 'nope' in collection 'c'"):
        env.pipeline.delete("c", "nope")
    with pytest.raises(UserError, match="'missing'"):
        env.pipeline.delete("missing", "zoo")


def test_another_embedding_model_is_refused_before_any_work(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.write("zoo.md", ZOO)
    env.pipeline.ingest([env.docs], "c")
    env.write("birds.md", BIRDS)

    other = FakeEmbedder(name="other-embedder", dim=32)
    with pytest.raises(EmbeddingModelMismatch) as err:
        env.make_pipeline(other).ingest([env.docs], "c")
    assert "fake-embedder" in str(err.value) and "other-embedder" in str(err.value)
    assert other.calls == 0
    assert env.catalog.get_document("c", "birds") is None

    # configured by name, lazily: refused without loading the model
    monkeypatch.setattr(pipeline_module, "get_embedder", lambda *a: pytest.fail("loaded"))
    lazy = IngestPipeline(
        env.settings.model_copy(update={"embedding_model": "other-embedder"}),
        env.catalog,
        index_opener=env.opener,
    )
    with pytest.raises(EmbeddingModelMismatch, match="other-embedder"):
        lazy.ingest([env.docs], "c")


def test_references_resolve_across_documents_in_either_order(env: Env) -> None:
    env.write("b.txt", "Intro line. See section Naming and binding for details.\n")
    env.pipeline.ingest([env.docs / "b.txt"], "c")
    (ref,) = env.catalog.references_from("c", "b")
    assert ref.target_id is None  # the target is not ingested yet

    env.write("zoo.md", ZOO)
    env.pipeline.ingest([env.docs / "zoo.md"], "c")
    (ref,) = env.catalog.references_from("c", "b")
    assert ref.target_id == "zoo_naming_and_binding"
    assert [r.source_id for r in env.catalog.references_to("c", "zoo_naming_and_binding")] == ["b"]

    env.pipeline.delete("c", "zoo")  # the target goes: the reference is unresolved again
    (ref,) = env.catalog.references_from("c", "b")
    assert ref.target_id is None


def test_ingest_documents_directly(env: Env) -> None:
    doc = Document(
        doc_id="manual",
        path="memory://manual",
        title="Manual",
        content_hash="abc",
        sections=[
            Section(title_path=["Manual", "Start"], text="Press the red button.", source_id="M_1"),
            Section(
                title_path=["Manual", "Stop"], text="See section Start first.", source_id="M_2"
            ),
        ],
    )
    report = env.pipeline.ingest_documents([doc], "c")
    assert statuses(report) == {"manual": "added"}
    assert report.timings.load_s == 0
    assert env.bm25("red button") == ["Press the red button."]
    assert [r.target_id for r in env.catalog.references_from("c", "M_2")] == ["M_1"]
    again = env.pipeline.ingest_documents([doc], "c")
    assert statuses(again) == {"manual": "unchanged"}


def test_clashing_doc_ids_and_missing_paths(env: Env) -> None:
    first = env.write("a/readme.md", ZOO)
    second = env.write("b/readme.md", BIRDS)
    report = env.pipeline.ingest([env.docs], "c")
    assert [f.status for f in report.files] == ["added", "added"]
    assert [f.doc_id for f in report.files] == ["readme", _distinct("readme", second)]
    assert env.catalog.get_document("c", "readme").path == str(first.resolve())  # type: ignore[union-attr]
    with pytest.raises(UserError, match=r"nowhere\.md"):
        env.pipeline.ingest([env.docs / "nowhere.md"], "c")


def test_rich_progress_draws_to_its_console(env: Env) -> None:
    env.write("zoo.md", ZOO)
    out = io.StringIO()
    with RichProgress(Console(file=out, force_terminal=False, width=100)) as progress:
        env.pipeline.ingest([env.docs], "c", progress=progress)
    text = out.getvalue()
    assert "files" in text and "chunks" in text


def test_vectors_stay_aligned_across_embed_jobs_and_write_groups(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "EMBED_JOB_MIN", 2)
    monkeypatch.setattr(pipeline_module, "WRITE_GROUP", 3)
    env.settings = env.settings.model_copy(update={"embedding_batch_size": 1})
    pipeline = env.make_pipeline(env.embedder)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
    for i, word in enumerate(words):
        sections = "".join(f"## Part {j}\n\n{word} {word} item {j}.\n\n" for j in range(i % 3 + 1))
        env.write(f"{word}.md", f"# {word.title()}\n\n{sections}")
    report = pipeline.ingest([env.docs], "c")
    assert report.totals["added"] == len(words)
    assert env.embedder.calls > 3  # several embedding jobs
    assert report.n_embedded == env.index().count() == env.catalog.get_collection("c").n_chunks  # type: ignore[union-attr]
    for word in words:
        top = env.index().search_dense(FakeEmbedder().embed([f"{word} {word}"])[0], 1)[0]
        assert top.chunk.doc_id == word
    pipeline.close()


def test_an_embedder_error_propagates_and_nothing_is_written(env: Env) -> None:
    class Broken(FakeEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("CUDA out of memory")

    env.write("zoo.md", ZOO)
    with pytest.raises(RuntimeError, match="out of memory"):
        env.make_pipeline(Broken()).ingest([env.docs], "c")
    assert env.catalog.get_document("c", "zoo") is None
    # the next run starts from scratch and succeeds
    assert statuses(env.pipeline.ingest([env.docs], "c")) == {"zoo.md": "added"}


def test_an_explicit_unsupported_file_fails_with_the_reason(env: Env) -> None:
    notes = env.write("notes.xyz", "some text")
    zoo = env.write("zoo.md", ZOO)
    report = env.pipeline.ingest([notes, zoo], "c")
    assert statuses(report) == {"notes.xyz": "failed", "zoo.md": "added"}
    assert "unsupported" in report.files[0].message
    assert report.model_dump()["totals"]["failed"] == 1


def _distinct(stem: str, path: Path) -> str:
    return f"{stem}_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:6]}"


def test_a_same_named_file_elsewhere_is_another_document(env: Env) -> None:
    first = env.write("notes.txt", "The zebra grazes on the savanna.\n")
    second = env.write("sub/notes.txt", "The heron waits in the shallow water.\n")
    env.pipeline.ingest([first], "c")
    report = env.pipeline.ingest([second], "c")
    (outcome,) = report.files
    assert (outcome.status, outcome.doc_id) == ("added", _distinct("notes", second))
    # nothing was replaced: both documents are searchable, with distinct section ids
    assert env.bm25("zebra") == ["The zebra grazes on the savanna."]
    assert env.bm25("heron") == ["The heron waits in the shallow water."]
    assert [c.source_id for c in env.catalog.doc_chunks("c", "notes")] == ["notes"]
    assert [c.source_id for c in env.catalog.doc_chunks("c", outcome.doc_id)] == [outcome.doc_id]
    # stable: rerunning either command, or both files in any order, changes nothing
    for paths in ([second], [first], [first, second], [second, first], [env.docs]):
        again = env.pipeline.ingest(paths, "c")
        assert {f.status for f in again.files} == {"unchanged"}, paths
    assert {f.doc_id for f in again.files} == {"notes", outcome.doc_id}
    assert env.index().count() == 2


def test_same_stem_in_one_batch_both_indexed_and_stable_on_rerun(env: Env) -> None:
    md = env.write("doc.md", ZOO)
    txt = env.write("doc.txt", "Plain text about the heron.\n")
    first = env.pipeline.ingest([md, txt], "c")
    assert [(f.status, f.doc_id) for f in first.files] == [
        ("added", "doc"),
        ("added", _distinct("doc", txt)),
    ]
    second = env.pipeline.ingest([md, txt], "c")
    assert [(f.status, f.doc_id) for f in second.files] == [
        ("unchanged", "doc"),
        ("unchanged", _distinct("doc", txt)),
    ]
    assert env.catalog.get_document("c", "doc").path == str(md.resolve())  # type: ignore[union-attr]
    # an edit of one file replaces that file only
    txt.write_text("Plain text about the quokka.\n", encoding="utf-8")
    third = env.pipeline.ingest([txt, md], "c")
    assert [(f.status, f.doc_id) for f in third.files] == [
        ("replaced", _distinct("doc", txt)),
        ("unchanged", "doc"),
    ]
    assert env.bm25("quokka") == ["Plain text about the quokka."]
    assert env.bm25("zebra") == ["The zebra grazes on the savanna."]


def test_a_failing_file_never_overwrites_another_files_document(env: Env) -> None:
    good = env.write("report.md", ZOO)
    env.pipeline.ingest([good], "c")
    bad = env.write("sub/report.pdf", b"%PDF-1.7 not really a pdf \x00\x01")
    empty = env.write("other/report.txt", "   \n")
    report = env.pipeline.ingest([bad, empty], "c")
    assert [f.status for f in report.files] == ["failed", "skipped"]
    assert report.files[0].doc_id == _distinct("report", bad)
    assert report.files[1].doc_id == _distinct("report", empty)
    kept = env.catalog.get_document("c", "report")
    assert kept is not None and kept.status == "indexed" and kept.path == str(good.resolve())
    assert env.bm25("zebra") == ["The zebra grazes on the savanna."]
    again = env.pipeline.ingest([good], "c")
    assert statuses(again) == {"report.md": "unchanged"}


def _act(text: str) -> str:
    return json.dumps(
        {
            "name": "The Bharatiya Nyaya Sanhita, 2023",
            "sections": [{"section_number": "1", "title": "Short title", "text": text}],
        }
    )


def test_a_content_derived_doc_id_is_kept_and_never_replaced_by_another_path(
    env: Env,
) -> None:
    first = env.write("a/bns.json", _act("The zebra grazes."))
    second = env.write("b/bns_copy.json", _act("The heron waits."))
    report = env.pipeline.ingest([first], "c")
    assert [(f.status, f.doc_id) for f in report.files] == [("added", "BNS")]
    for _ in range(2):  # the same clear failure on every run
        report = env.pipeline.ingest([second], "c")
        (outcome,) = report.files
        assert (outcome.status, outcome.doc_id) == ("failed", "BNS")
        assert str(first.resolve()) in outcome.message and "'BNS'" in outcome.message
    assert env.bm25("zebra") == ["The zebra grazes."]
    assert env.bm25("heron") == []
    assert env.catalog.get_document("c", "BNS").path == str(first.resolve())  # type: ignore[union-attr]
    # in one batch: the first path wins, the second fails
    env.pipeline.delete("c", "BNS")
    report = env.pipeline.ingest([second, first], "c")
    assert [f.status for f in report.files] == ["added", "failed"]
    assert "earlier in this batch" in report.files[1].message
    # the file holding the id still updates in place
    second.write_text(_act("The quokka smiles."), encoding="utf-8")
    assert statuses(env.pipeline.ingest([second], "c")) == {"bns_copy.json": "replaced"}


FAQ = [
    {"faq_id": 1, "question": "How do herons fish?", "text": "They wait in water."},
    {"faq_id": 2, "question": "Where do zebras live?", "text": "On the savanna."},
]


def test_changed_record_options_replace_and_are_no_duplicate(env: Env) -> None:
    from sleuth.ingest.records import RecordOptions

    faq = env.write("faq.jsonl", "\n".join(json.dumps(r) for r in FAQ) + "\n")
    report = env.pipeline.ingest([faq], "c")
    assert statuses(report) == {"faq.jsonl": "added"}
    assert env.bm25("savanna") == ["On the savanna."]

    options = RecordOptions(text_field="question", source_id_template="Q_{faq_id}")
    report = env.pipeline.ingest([faq], "c", options)
    assert statuses(report) == {"faq.jsonl": "replaced"}
    assert env.bm25("savanna") == []
    assert env.bm25("zebras") == ["Where do zebras live?"]
    assert [c.source_id for c in env.catalog.doc_chunks("c", "faq")] == ["Q_1", "Q_2"]
    assert statuses(env.pipeline.ingest([faq], "c", options)) == {"faq.jsonl": "unchanged"}

    # a byte-identical copy read with other options is another content, not a duplicate
    copy = env.write("copy/faq_copy.jsonl", faq.read_text(encoding="utf-8"))
    other = RecordOptions(text_field="question", source_id_template="C_{faq_id}")
    assert statuses(env.pipeline.ingest([copy], "c", other)) == {"faq_copy.jsonl": "added"}
    # ...while the same options make it a duplicate
    third = env.write("copy2/faq_third.jsonl", faq.read_text(encoding="utf-8"))
    assert statuses(env.pipeline.ingest([third], "c", options)) == {"faq_third.jsonl": "duplicate"}


def test_unsupported_files_in_a_directory_are_reported_in_one_warning(env: Env) -> None:
    env.write("zoo.md", ZOO)
    env.write("a.xyz", "x")
    env.write("sub/b.bin", b"\x00\x01")
    env.write("sub/c.xyz", "x")
    env.write(".hidden/d.xyz", "hidden files stay silent")
    report = env.pipeline.ingest([env.docs], "c")
    assert statuses(report) == {"zoo.md": "added"}
    (warning,) = [w for w in report.warnings if "unsupported" in w]
    assert warning.startswith("skipped 3 files with unsupported types (.bin, .xyz): ")
    assert "a.xyz" in warning and "b.bin" in warning and "c.xyz" in warning
    assert "d.xyz" not in warning
    quiet = env.pipeline.ingest([env.docs / "zoo.md"], "c")
    assert quiet.warnings == []
