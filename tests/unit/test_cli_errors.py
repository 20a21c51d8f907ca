"""The CLI's error paths: one-line messages, exit codes, nothing created on bad input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth import __version__
from sleuth.app import Sleuth
from sleuth.cli import app, main
from sleuth.config import Settings
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.store.catalog import Catalog

runner = CliRunner()


def data_dir() -> Path:
    return Settings().data_dir  # the per-test dir set by the unit conftest


def invoke(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=env)


@pytest.mark.parametrize(
    "args",
    [["ask", ""], ["ask", "   "], ["search", ""], ["search", " \t"]],
)
def test_empty_question_or_query_is_a_usage_error(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "is empty" in result.stderr
    assert not data_dir().exists()


@pytest.mark.parametrize(
    ("question", "says"),
    [("???", "holds no words to search for"), ("x" * 4001, "too long")],
)
def test_a_question_a_run_would_refuse_is_a_usage_error(question: str, says: str) -> None:
    result = invoke("ask", question)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert not data_dir().exists()


@pytest.mark.parametrize("bad", ["a/b", "../../etc", "x" * 300, "", ".", ".."])
@pytest.mark.parametrize("command", ["ask", "search", "ingest"])
def test_bad_collection_name_is_rejected_before_anything_is_created(
    command: str, bad: str, tmp_path: Path
) -> None:
    target = tmp_path / "doc.md"
    target.write_text("# T\n\nsome text\n")
    arg = str(target) if command == "ingest" else "question"
    result = invoke(command, arg, "-c", bad)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: invalid collection name ")
    assert repr(bad[:20])[:-1] in line and "1 to 64 characters" in line
    assert "\n" not in line
    assert not data_dir().exists()  # no catalog, no index, no ghost collection


def test_wrong_index_backend_is_a_clear_error_before_opening_anything() -> None:
    Catalog(Settings().catalog_url).ensure_collection("statutes", "all-MiniLM-L6-v2", 384, "local")
    result = invoke(
        "search", "murder", "-c", "statutes", "--mode", "bm25",
        env={"SLEUTH_INDEX_BACKEND": "milvus"},
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert "'local'" in message and "'milvus'" in message
    assert "SLEUTH_INDEX_BACKEND=local" in message
    assert not (data_dir() / "milvus.db").exists()
    assert not (data_dir() / "indexes").exists()


def test_config_errors_one_line_per_field() -> None:
    result = invoke(
        "collections",
        env={"SLEUTH_INDEX_BACKEND": "foo", "SLEUTH_MAX_ITERATIONS": "0"},
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (
        "error: SLEUTH_INDEX_BACKEND='foo': Input should be 'local', 'milvus' or 'postgres'"
    )
    assert lines[1].startswith("error: SLEUTH_MAX_ITERATIONS='0': Input should be greater")
    assert len(lines) == 2


def test_config_command_masks_secrets_and_marks_invalid() -> None:
    result = invoke(
        "config",
        env={
            "SLEUTH_LLM_API_KEY": "sk-abc123",
            "SLEUTH_MILVUS_TOKEN": "root:Milvus",
            "SLEUTH_DATABASE_URL": "postgresql+psycopg://u:hunter2@h/db",
            "SLEUTH_RUN_TIMEOUT_S": "-1",
        },
    )
    out = result.stdout
    for secret in ("sk-abc123", "root:Milvus", "hunter2"):
        assert secret not in result.output
    assert "SLEUTH_LLM_API_KEY=***" in out
    assert "SLEUTH_MILVUS_TOKEN=***" in out
    assert "SLEUTH_DATABASE_URL=postgresql+psycopg://u:***@h/db" in out
    assert "SLEUTH_RUN_TIMEOUT_S=-1    # INVALID" in out
    assert "SLEUTH_TOP_K=5" in out
    assert "error: SLEUTH_RUN_TIMEOUT_S='-1'" in result.stderr


def test_unreachable_catalog_is_one_line() -> None:
    result = invoke(
        "collections",
        env={"SLEUTH_DATABASE_URL": "postgresql+psycopg://u:pw9@127.0.0.1:5999/x"},
    )
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    line = result.stderr.strip()
    assert line.startswith("error: cannot open the catalog database SLEUTH_DATABASE_URL=")
    assert "u:***@" in line and "pw9" not in line and "\n" not in line


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"sleuth {__version__}"


def _boom(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("boom\nsecond line")


def test_main_turns_unexpected_errors_into_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Catalog, "list_collections", _boom)
    monkeypatch.setattr(sys, "argv", ["sleuth", "collections"])
    monkeypatch.delenv("SLEUTH_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: RuntimeError: boom",
        "(set SLEUTH_DEBUG=1 for the traceback)",
    ]
    monkeypatch.setenv("SLEUTH_DEBUG", "1")
    with pytest.raises(SystemExit):
        main()
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "error: RuntimeError: boom" in err


def test_delete_whole_collection_removes_its_index(tmp_path: Path) -> None:
    doc = tmp_path / "old.md"
    doc.write_text("# Old\n\nThe zeppelin hangar stores obsolete propellers.\n")
    s = Sleuth(Settings(), embedder=HashingEmbedder(name="all-MiniLM-L6-v2"))
    s.pipeline.ingest([doc], "notes")
    assert s.kb.search("notes", "zeppelin propellers", mode="bm25")
    s.close()
    index_dir = data_dir() / "indexes" / "notes"
    assert index_dir.is_dir()

    result = invoke("delete", "-c", "notes", "--whole-collection")
    assert result.exit_code == 0, result.output
    assert not index_dir.exists()  # the journal held the deleted text
    assert Catalog(Settings().catalog_url).get_collection("notes") is None

    new = tmp_path / "new.md"
    new.write_text("# New\n\nThe lighthouse keeper polishes the lamp.\n")
    s = Sleuth(Settings(), embedder=HashingEmbedder(name="all-MiniLM-L6-v2"))
    s.pipeline.ingest([new], "notes")
    assert s.kb.index("notes").count() == 1
    hits = s.kb.search("notes", "zeppelin propellers hangar", mode="bm25")
    assert all(h.chunk.doc_id != "old" for h in hits)
    s.close()


def test_delete_unknown_collection_is_one_line() -> None:
    result = invoke("delete", "-c", "nope", "--whole-collection")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: collection 'nope' does not exist"
