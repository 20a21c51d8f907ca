"""``sleuth eval`` and ``sleuth eval compare`` from the command line (hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sleuth.cli.eval as cli_eval
from sleuth import cli
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.retrieval.embeddings import HashingEmbedder

runner = CliRunner()
CORPUS = """# Camelids

## Llamas

Llamas are domesticated South American camelids used as pack animals by the Inca.

## Alpacas

Alpacas are kept for their soft fibre, which is spun into yarn.
"""
QUESTIONS = [
    {"id": "q1", "question": "What did the Inca use llamas for?", "answers": ["pack animals"],
     "gold_source_ids": ["camelids_llamas"], "type": "llama"},
    {"id": "q2", "question": "Why are alpacas kept?", "answers": ["soft fibre"],
     "gold_source_ids": ["camelids_alpacas"]},
]  # fmt: skip


@pytest.fixture
def own_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dataset folder (questions.jsonl + corpus/) and a CLI that embeds by hashing."""
    folder = tmp_path / "camelids"
    (folder / "corpus").mkdir(parents=True)
    (folder / "corpus" / "camelids.md").write_text(CORPUS)
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS))
    embedder = HashingEmbedder()

    def hashing_sleuth(llm: str | None) -> Sleuth:
        settings = Settings(embedding_model=embedder.name, planner="heuristic")
        return Sleuth(settings, embedder=embedder)

    monkeypatch.setattr(cli_eval, "_eval_sleuth", hashing_sleuth)
    monkeypatch.chdir(tmp_path)
    return folder


def test_eval_writes_the_results_folder(own_dataset: Path, tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["eval", "-d", str(own_dataset), "--out", "a"])
    assert result.exit_code == 0, result.output
    assert "results: a/" in result.stdout and "all gold retrieved" in result.stdout
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["questions"] == 2 and summary["dataset"] == "camelids"
    assert summary["collection"]["collection"].startswith("eval_camelids_")
    assert summary["collection"]["ingest"]["added"] == 1
    assert summary["retrieval"]["all_gold_retrieved"] == 1.0
    assert len((tmp_path / "a" / "results.jsonl").read_text().splitlines()) == 2

    again = runner.invoke(
        cli.app, ["eval", "-d", str(own_dataset), "--mode", "guided", "--limit", "1", "--json"]
    )
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert second["questions"] == 1 and second["collection"]["ingest"]["unchanged"] == 1
    out_b = Path(second["results_dir"])
    assert out_b.parts[0] == "eval-results" and (tmp_path / out_b / "report.md").is_file()

    compared = runner.invoke(cli.app, ["eval", "compare", "a", str(out_b)])
    assert compared.exit_code == 0, compared.output
    assert "different numbers of questions: 2 vs 1" in compared.stderr
    assert "recall@5" in compared.stdout and "B - A" in compared.stdout
    as_json = json.loads(
        runner.invoke(cli.app, ["eval", "compare", "a", str(out_b), "--json"]).stdout
    )
    assert {r["metric"] for r in as_json["rows"]} >= {"MRR", "latency p50 (s)", "steps"}


def test_eval_reuses_an_existing_collection(own_dataset: Path, tmp_path: Path) -> None:
    first = runner.invoke(cli.app, ["eval", "-d", str(own_dataset), "--out", "a"])
    assert first.exit_code == 0, first.output
    built = json.loads((tmp_path / "a" / "summary.json").read_text())["collection"]
    result = runner.invoke(
        cli.app,
        ["eval", "-d", str(own_dataset / "questions.jsonl"), "-c", built["collection"], "--json"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["collection"]["ingest"] is None
    assert summary["retrieval"]["all_gold_retrieved"] == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval"], "give --dataset"),
        (["eval", "-d", "nowhere.jsonl"], "unknown dataset 'nowhere.jsonl'"),
        (["eval", "-d", "{q}", "--mode", "chain"], "--mode must be react or guided"),
        (["eval", "-d", "{q}", "--mode", "GUIDED", "--out", "{q}"], "exists and is not empty"),
        (["eval", "-d", "{q}", "-c", "a/b"], "invalid collection name"),
        (["eval", "-d", "{bad}"], "bad.jsonl:2: field 'question' must be a non-empty string"),
        (["eval", "-d", "{q}", "--out", "{q}"], "exists and is not empty"),
        (["eval", "-d", "{q}", "-c", "missing"], "collection 'missing' does not exist; leave"),
        (["eval", "-d", "{q}", "-c", "x", "--corpus", "{q}"], "exclude each other"),
        (["eval", "-d", "{q}", "--out", "{bad}/sub"], "cannot write the results to"),
        (["eval", "compare", "nowhere", "{q}"], "no summary.json in nowhere"),
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(
    own_dataset: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok?"}\n{"question": ""}\n')
    filled = [a.format(q=own_dataset, bad=bad) for a in args]
    result = runner.invoke(cli.app, filled)
    assert result.exit_code in (1, 2), result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "eval-results").exists()


def test_an_unknown_llm_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "Q?"}\n')
    result = runner.invoke(cli.app, ["eval", "-d", str(questions), "--llm", "bogus"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --llm: ") and "bogus" in result.stderr
