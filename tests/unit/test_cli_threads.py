"""``sleuth ask --new-thread`` / ``--thread`` and ``sleuth chat``: follow-ups in a thread
from the command line (hashing embedder, no real model)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sleuth.cli._common
from sleuth.app import Sleuth
from sleuth.cli import app
from sleuth.config import Settings
from sleuth.retrieval.embeddings import HashingEmbedder
from tests.helpers import STATUTE_SECTIONS, make_document

runner = CliRunner()


@pytest.fixture
def cli_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A collection 'laws' the CLI opens with the hashing embedder."""
    embedder = HashingEmbedder()

    def open_sleuth() -> Sleuth:
        settings = Settings(data_dir=tmp_path, embedding_model=embedder.name)
        return Sleuth(settings, embedder=embedder)

    s = open_sleuth()
    s.pipeline.ingest_documents([make_document(STATUTE_SECTIONS)], "laws")
    s.close()
    monkeypatch.setattr(sleuth.cli._common, "open_sleuth", open_sleuth)
    return tmp_path


def _turns(data_dir: Path, thread_id: str) -> list[tuple[str, str | None]]:
    s = Sleuth(Settings(data_dir=data_dir, embedding_model=HashingEmbedder().name))
    try:
        return [(t.question, t.rewritten_question) for t in s.catalog.thread_turns(thread_id)]
    finally:
        s.close()


def test_ask_starts_a_thread_and_a_follow_up_is_asked_in_it(cli_app: Path) -> None:
    first = runner.invoke(
        app, ["ask", "What is the punishment for murder?", "-c", "laws", "--new-thread"]
    )
    assert first.exit_code == 0, first.output
    thread_id = re.search(r"thread ([0-9a-f]{32})", first.output).group(1)  # type: ignore[union-attr]
    follow = runner.invoke(
        app, ["ask", "And if a group of five persons commits it?", "--thread", thread_id]
    )
    assert follow.exit_code == 0, follow.output
    assert "Follow-up made standalone" in follow.output
    turns = _turns(cli_app, thread_id)
    assert [q for q, _ in turns] == [
        "What is the punishment for murder?",
        "And if a group of five persons commits it?",
    ]
    assert turns[0][1] is None and "(What is the punishment" in str(turns[1][1])


def test_a_thread_that_is_not_there_or_of_another_collection_is_a_clear_error(
    cli_app: Path,
) -> None:
    missing = runner.invoke(app, ["ask", "And then?", "--thread", "f" * 32])
    assert missing.exit_code == 1 and f"thread '{'f' * 32}' not found" in missing.output
    both = runner.invoke(app, ["ask", "q?", "--thread", "x", "--new-thread"])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_chat_keeps_one_thread_until_new(cli_app: Path) -> None:
    script = "\n".join(
        [
            "What is the punishment for murder?",
            "And if a group of five persons commits it?",
            "/history",
            "/new",
            "What is theft?",
            "/exit",
        ]
    )
    result = runner.invoke(app, ["chat", "-c", "laws"], input=script + "\n")
    assert result.exit_code == 0, result.output
    ids = re.findall(r"thread ([0-9a-f]{32})", result.output)
    assert len(set(ids)) == 2  # the first thread, then the one /new started
    assert "Follow-up made standalone" in result.output
    assert "(searched as: And if a group of five persons commits it (What is" in (result.output)
    assert [q for q, _ in _turns(cli_app, ids[0])] == [
        "What is the punishment for murder?",
        "And if a group of five persons commits it?",
    ]
    assert [q for q, _ in _turns(cli_app, ids[-1])] == ["What is theft?"]
