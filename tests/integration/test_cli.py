"""The ``sleuth`` command as a new user runs it: real embedder, subprocesses, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

NOTES = """# Lighthouse keeping

## Lamp maintenance

The lamp of the Skerry lighthouse is cleaned every Tuesday with vinegar and soft cloth.
The keeper records each cleaning in the red logbook.

## Fog signals

During fog the keeper sounds the horn twice every ninety seconds until visibility returns.
"""


def run(args: list[str], data_dir: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLEUTH_DATA_DIR": str(data_dir), "SLEUTH_LLM": "heuristic"}
    exe = Path(sys.executable).with_name("sleuth")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    docs = root / "docs"
    docs.mkdir()
    (docs / "lighthouse.md").write_text(NOTES)
    (docs / "empty.txt").write_text("   \n\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 this is not really a pdf \x00\x01")
    data = root / "data"
    result = run(["ingest", str(docs), "-c", "notes"], data)
    assert result.returncode == 0, result.stderr
    return docs, data


def test_ingest_reports_skipped_and_failed_files_by_name(workspace: tuple[Path, Path]) -> None:
    docs, data = workspace
    result = run(["ingest", str(docs), "-c", "notes", "--json"], data)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    status = {Path(f["path"]).name: f["status"] for f in report["files"]}
    assert status == {"lighthouse.md": "unchanged", "empty.txt": "skipped", "broken.pdf": "failed"}
    failed = next(f for f in report["files"] if f["status"] == "failed")
    assert failed["message"]
    assert report["n_embedded"] == 0


def test_ask_answers_with_citation_and_exit_code_0(workspace: tuple[Path, Path]) -> None:
    _, data = workspace
    result = run(
        ["ask", "How often is the lighthouse lamp cleaned?", "-c", "notes", "--json"], data
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["status"] == "completed"
    assert "Tuesday" in response["answer"]["answer_text"]
    assert response["answer"]["citations"][0]["source_id"].startswith("lighthouse_")
    assert {"task_id", "reasoning_steps", "tool_calls", "trace"} <= response.keys()


def test_ask_streams_an_ascii_trace(workspace: tuple[Path, Path]) -> None:
    _, data = workspace
    result = run(["ask", "What does the keeper do during fog?", "-c", "notes", "--ascii"], data)
    assert result.returncode == 0, result.stderr
    assert result.stdout.isascii()
    out = result.stdout
    assert out.index("rag_search(") < out.index("[OK]") < out.index("Answer")
    assert "horn" in out


def test_insufficient_context_exit_code_3(workspace: tuple[Path, Path]) -> None:
    _, data = workspace
    result = run(["ask", "What is the capital of France?", "-c", "notes", "--quiet"], data)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.count("Insufficient context") == 1  # said once, however labelled


def test_quiet_prints_only_the_answer_and_citation_ids(workspace: tuple[Path, Path]) -> None:
    _, data = workspace
    result = run(["ask", "How often is the lighthouse lamp cleaned?", "-c", "notes", "-q"], data)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert "Tuesday" in lines[0]
    assert lines[-1].startswith("citations: lighthouse_")
    assert result.stdout.isascii()  # no box, no rule
    assert "Answer" not in result.stdout


def test_model_loading_draws_no_progress_bars(workspace: tuple[Path, Path]) -> None:
    _, data = workspace
    result = run(["search", "fog horn", "-c", "notes", "--mode", "dense"], data)
    assert result.returncode == 0, result.stderr
    assert "Loading weights" not in result.stderr
    assert "%|" not in result.stderr
    assert result.stderr.isascii()


def test_wrong_index_backend_names_both_and_opens_nothing(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, data = workspace
    monkeypatch.setenv("SLEUTH_INDEX_BACKEND", "milvus")
    result = run(["ask", "What does the keeper do during fog?", "-c", "notes"], data)
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr
    assert "'local'" in result.stderr and "SLEUTH_INDEX_BACKEND=local" in result.stderr
    assert not (data / "milvus.db").exists()


def test_unknown_collection_is_a_one_line_error(workspace: tuple[Path, Path]) -> None:
    _, data = workspace
    result = run(["ask", "anything", "-c", "nope"], data)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "collection 'nope' does not exist" in result.stderr


def test_delete_removes_the_document_from_search(workspace: tuple[Path, Path]) -> None:
    docs, data = workspace
    (docs / "extra.md").write_text("# Extra\n\nThe quartermaster stores spare wicks in crate nine.")
    assert run(["ingest", str(docs / "extra.md"), "-c", "notes"], data).returncode == 0
    hits = json.loads(run(["search", "quartermaster wicks", "-c", "notes", "--json"], data).stdout)
    assert hits[0]["chunk"]["doc_id"] == "extra"
    deleted = run(["delete", str(docs / "extra.md"), "-c", "notes"], data)
    assert deleted.returncode == 0, deleted.stderr
    for mode in ("bm25", "dense", "hybrid"):
        result = run(
            ["search", "quartermaster wicks", "-c", "notes", "--mode", mode, "--json"], data
        )
        assert all(h["chunk"]["doc_id"] != "extra" for h in json.loads(result.stdout)), mode
    (docs / "extra.md").unlink()


def test_delete_whole_collection_removes_its_index_files(tmp_path: Path) -> None:
    doc = tmp_path / "secret.md"
    doc.write_text("# Secret\n\nThe vault combination is orange-kangaroo-42.\n")
    data = tmp_path / "data"
    assert run(["ingest", str(doc), "-c", "vault"], data).returncode == 0
    index_dir = data / "indexes" / "vault"
    assert index_dir.is_dir()
    deleted = run(["delete", "-c", "vault", "--whole-collection"], data)
    assert deleted.returncode == 0, deleted.stderr
    assert not index_dir.exists()
    other = tmp_path / "other.md"
    other.write_text("# Other\n\nNothing to see here about kangaroos.\n")
    assert run(["ingest", str(other), "-c", "vault"], data).returncode == 0
    hits = json.loads(run(["search", "orange kangaroo 42", "-c", "vault", "--json"], data).stdout)
    assert all("orange-kangaroo" not in h["chunk"]["text"] for h in hits)


def test_demo_answers_and_reuses_its_index(tmp_path: Path) -> None:
    first = run(["demo", "--ascii"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "[pyref_" in first.stdout
    assert "built in" in first.stderr
    second = run(["demo", "--ascii"], tmp_path)
    assert second.returncode == 0, second.stderr
    assert "reused (unchanged)" in second.stderr
