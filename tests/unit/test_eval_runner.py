"""``sleuth eval``'s runner and report: scoring one run, aggregating, the results folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from sleuth.agents.answer import Citation, GeneratedAnswer
from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.errors import UserError
from sleuth.eval.datasets import EvalDataset, EvalQuestion
from sleuth.eval.report import compare_rows, load_summary, markdown_report, write_results
from sleuth.eval.runner import (
    EvalAborted,
    EvalConfig,
    prepare_collection,
    run_eval,
    score_run,
    summarize,
)
from sleuth.llm.testing import ScriptedChatModel, final, tool_call
from sleuth.service import AgentSearchResponse
from sleuth.types import MAX_QUESTION_CHARS
from tests.helpers import make_app

MURDER = EvalQuestion(
    id="murder",
    question="What is the punishment for murder?",
    answers=("death or imprisonment for life",),
    gold_source_ids=("BNS_S103",),
    type="punishment",
)
THEFT = EvalQuestion(
    id="theft", question="What is theft?", gold_source_ids=("BNS_S303",), type="definition"
)


def response(
    retrieved: list[str],
    cited: list[str],
    answer: str,
    *,
    insufficient: bool = False,
    trace: dict[str, Any] | None = None,
    mode: str = "react",
) -> AgentSearchResponse:
    return AgentSearchResponse(
        task_id="t",
        query="q",
        collection="c",
        mode=mode,
        status=RunStatus.INSUFFICIENT_CONTEXT if insufficient else RunStatus.COMPLETED,
        answer=GeneratedAnswer(
            answer_text=answer,
            citations=[Citation(source_id=s) for s in cited],
            is_insufficient_context=insufficient,
        ),
        reasoning_steps=[],
        tool_calls=[
            {"tool": "rag_search", "arguments": {"query": "murder"}},
            {"tool": "rag_search", "arguments": {"query": "murder"}},
            {"tool": "read_section", "arguments": {"source_id": "BNS_S103"}},
        ],
        trace={"retrieved_source_ids": retrieved, "iterations": 2, **(trace or {})},
    )


def test_score_run_measures_retrieval_answer_citations_and_behaviour() -> None:
    config = EvalConfig(price_input_per_mtok=1.0, price_output_per_mtok=4.0)
    resp = response(
        ["BNS_S101", "BNS_S103", "BNS_S101"],
        ["BNS_S103", "BNS_S101"],
        "The punishment is death or imprisonment for life [BNS_S103].",
        trace={
            "token_usage": {"input_tokens": 1000, "output_tokens": 250, "total_tokens": 1250},
            "agentic": {
                "planning": {"replans": [{"reason": "x"}]},
                "reflection": [{"needs_revision": True}, {"needs_revision": False}],
            },
            "citations_removed": [{"source_id": "7"}],
        },
    )
    record = score_run(MURDER, resp, 0.5, config)
    assert record["retrieved"] == ["BNS_S101", "BNS_S103"]
    assert record["recall_at"]["1"] == 0.0 and record["recall_at"]["2"] == 1.0
    assert record["all_gold_at"]["1"] is False and record["all_gold_retrieved"] is True
    assert record["mrr"] == 0.5
    assert record["exact_match"] == 0.0 and record["answer_contains"] == 1.0
    assert 0.0 < record["f1"] < 1.0
    assert (record["citation_precision"], record["citation_recall"]) == (0.5, 1.0)
    assert record["repeated_calls"] == 1 and record["tool_calls"] == 3
    assert (record["replans"], record["revisions"], record["citations_removed"]) == (1, 1, 1)
    assert record["cost_usd"] == pytest.approx((1000 * 1.0 + 250 * 4.0) / 1e6)
    json.dumps(record)  # one line of results.jsonl


def test_an_insufficient_answer_is_not_scored_as_an_answer() -> None:
    resp = response(["BNS_S103"], [], "death or imprisonment for life", insufficient=True)
    record = score_run(MURDER, resp, 0.1, EvalConfig())
    assert record["exact_match"] == 0.0 and record["answer_contains"] == 0.0
    assert record["citation_precision"] is None and record["citation_recall"] == 0.0
    assert record["cost_usd"] is None  # no prices, no tokens


def test_a_decline_states_no_verdict_whatever_word_it_opens_with() -> None:
    asked = EvalQuestion(
        id="yn", question="Can a ferry sail in a storm?", gold_source_ids=("HC_S4",), verdict="no"
    )
    declined = response(
        ["HC_S9"], [], "No section retrieved answers this question.", insufficient=True
    )
    record = score_run(asked, declined, 0.1, EvalConfig())
    assert record["verdict"] is None and record["verdict_correct"] is False
    answered = response(["HC_S4"], ["HC_S4"], "No. No ferry shall sail in a storm [HC_S4].")
    assert score_run(asked, answered, 0.1, EvalConfig())["verdict_correct"] is True


def test_summary_skips_runs_a_metric_does_not_apply_to() -> None:
    records = [
        score_run(MURDER, response(["BNS_S103"], ["BNS_S103"], "x"), 0.2, EvalConfig()),
        score_run(THEFT, response(["BNS_S101"], [], "", insufficient=True), 0.4, EvalConfig()),
    ]
    s = summarize(records)
    assert s["questions"] == 2
    assert s["answer"]["runs"] == 1  # THEFT has no gold answer
    assert s["citations"]["precision"] == 1.0  # over the one run that cites
    assert s["citations"]["recall"] == 0.5
    assert s["outcome"]["insufficient_rate"] == 0.5
    d = s["outcome"]["decision_calibration"]
    assert d["counts"] == {
        "answered/gold_retrieved": 1,
        "answered/gold_missing": 0,
        "insufficient/gold_retrieved": 0,
        "insufficient/gold_missing": 1,
    }
    assert d["answered_with_gold"] == 1.0 and d["insufficient_without_gold"] == 1.0
    assert s["latency_s"]["p50"] == pytest.approx(0.3)
    assert s["by_type"]["definition"]["questions"] == 1


def dataset(*questions: EvalQuestion) -> EvalDataset:
    return EvalDataset(name="tiny", questions=questions, collection="test")


def test_run_eval_end_to_end_on_a_small_collection(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    too_long = EvalQuestion(id="long", question="x" * (MAX_QUESTION_CHARS + 1))
    run = run_eval(app, dataset(MURDER, THEFT, too_long), EvalConfig(mode="react"))
    murder, theft, long = run.records
    assert murder["status"] == "completed" and "BNS_S103" in murder["cited"]
    assert murder["recall_at"]["2"] == 1.0 and murder["all_gold_retrieved"] is True
    assert theft["all_gold_retrieved"] is True
    assert long["status"] == "error" and "too long" in long["error"]
    s = run.summary
    assert s["outcome"]["statuses"]["error"] == 1 and s["outcome"]["error_rate"] == 1 / 3
    assert s["collection"] == {"collection": "test", "ingest": None, "gold_missing": []}
    assert s["reasoner"] == "heuristic" and s["mode"] == "react"
    assert s["agent"]["tool_calls"] > 0
    app.close()


def test_guided_runs_are_calibrated(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    run = run_eval(app, dataset(MURDER), EvalConfig(mode="guided", limit=1))
    assert run.records[0]["crag"], "a guided run has CRAG rounds"
    # no model: no tokens per stage; not a yes/no question: no verdict check
    assert run.records[0]["tokens_by_stage"] == {}
    assert run.records[0]["yes_no_check"] is None
    assert run.summary["crag_calibration"][-1]["verdict"] == "all"
    assert "## CRAG verdict calibration (guided)" in markdown_report(run)
    app.close()


def test_missing_gold_ids_and_collections_are_reported(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    ghost = EvalQuestion(id="g", question="What is arson?", gold_source_ids=("BNS_S326",))
    info = prepare_collection(app, dataset(MURDER, ghost))
    assert info["gold_missing"] == ["BNS_S326"]
    with pytest.raises(UserError, match="collection 'nope' does not exist"):
        prepare_collection(app, dataset(MURDER), "nope")
    with pytest.raises(UserError, match="unknown mode"):
        run_eval(app, dataset(MURDER), EvalConfig(mode="chain"))
    app.close()


def test_results_folder_and_comparison(tmp_path: Path) -> None:
    app = make_app(tmp_path / "data")
    react = run_eval(app, dataset(MURDER, THEFT), EvalConfig(mode="react"))
    guided = run_eval(app, dataset(MURDER, THEFT), EvalConfig(mode="guided"))
    files = write_results(react, tmp_path / "a")
    write_results(guided, tmp_path / "b")
    names = sorted(f.name for f in files)
    plots = ["recall_at_k.png", "latency.png", "calibration.png"]
    assert names == sorted(["results.jsonl", "summary.json", "report.md", *plots])
    for png in (tmp_path / "a").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    lines = (tmp_path / "a" / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["murder", "theft"]
    report = (tmp_path / "a" / "report.md").read_text()
    assert "| 1 | " in report and "![recall@k](recall_at_k.png)" in report
    rows = {
        r["metric"]: r
        for r in compare_rows(
            load_summary(tmp_path / "a"), load_summary(tmp_path / "b" / "summary.json")
        )
    }
    steps = rows["steps"]
    assert steps["delta"] == pytest.approx(steps["b"] - steps["a"]) and steps["better"] is None
    lat = rows["latency p50 (s)"]
    assert lat["better"] == ("a" if lat["b"] > lat["a"] else "b" if lat["b"] < lat["a"] else "=")
    assert "cost (USD)" not in rows  # neither run reported tokens
    app.close()


def test_load_summary_refuses_what_eval_did_not_write(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no summary\.json"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_text('{"x": 1}')
    with pytest.raises(UserError, match="not a summary written by 'sleuth eval'"):
        load_summary(tmp_path)


def test_a_model_run_reports_short_answers_tokens_and_cost(tmp_path: Path) -> None:
    usage = {"input_tokens": 300, "output_tokens": 20, "total_tokens": 320}

    def with_usage(message: AIMessage) -> AIMessage:
        message.usage_metadata = usage  # type: ignore[assignment]
        return message

    script = [
        with_usage(tool_call("rag_search", {"query": "punishment for murder"})),
        with_usage(final("Death or imprisonment for life [BNS_S103].")),
        # the final answer written again from the best sections (synthesis)
        with_usage(AIMessage("Death or imprisonment for life [BNS_S103].")),
    ]
    model = ScriptedChatModel(script * 2)
    app = make_app(tmp_path, reasoner=LLMReasoner(model, name="scripted"))
    config = EvalConfig(mode="react", price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    run = run_eval(app, dataset(MURDER, MURDER), config)
    first = run.records[0]
    assert first["cited"] == ["BNS_S103"]
    assert first["exact_match"] == 1.0 and first["f1"] == 1.0  # the marker is not compared
    assert first["tokens"] == {"input_tokens": 900, "output_tokens": 60, "total_tokens": 960}
    tokens = run.summary["tokens"]
    assert tokens["reported"] and tokens["total"]["total_tokens"] == 1920
    assert tokens["cost_usd"] == pytest.approx(2 * (900 * 2.0 + 60 * 10.0) / 1e6)
    assert run.summary["reasoner"] == "scripted"
    app.close()


def test_parallel_runs_give_the_records_in_question_order(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    questions = (MURDER, THEFT, MURDER, THEFT)
    alone = run_eval(app, dataset(*questions), EvalConfig(mode="guided"))
    together = run_eval(app, dataset(*questions), EvalConfig(mode="guided", workers=3))
    assert [r["id"] for r in together.records] == ["murder", "theft", "murder", "theft"]
    for a, b in zip(alone.records, together.records, strict=True):
        assert (a["retrieved"], a["cited"], a["status"]) == (
            b["retrieved"],
            b["cited"],
            b["status"],
        )
    assert together.summary["settings"]["workers"] == 3
    with pytest.raises(UserError, match="workers must be at least 1"):
        EvalConfig(workers=0)
    app.close()


def test_an_evaluation_whose_first_runs_all_fail_stops_with_the_reason(tmp_path: Path) -> None:
    model = ScriptedChatModel([tool_call("rag_search", "{broken json")], repeat_last=True)
    app = make_app(tmp_path, reasoner=LLMReasoner(model, name="scripted"))
    with pytest.raises(EvalAborted) as info:
        run_eval(app, dataset(MURDER, THEFT, MURDER, THEFT), EvalConfig(mode="react"))
    message = str(info.value)
    assert message.startswith("the first 3 runs ended in status error, so the evaluation stopped:")
    # the reason is the run's trace.error: what went wrong, with the tool it concerns
    assert "replies could not be used" in message and "must be a JSON object" in message
    assert "rag_search" in message
    app.close()


def test_errors_and_timeouts_are_not_declines(tmp_path: Path) -> None:
    resp = response(["BNS_S101"], [], "insufficient", insufficient=True)
    resp.status = RunStatus.TIMEOUT
    record = score_run(MURDER, resp, 0.1, EvalConfig())
    assert record["insufficient_context"] is False
    s = summarize([record])
    assert s["outcome"]["insufficient_rate"] == 0.0
    assert s["outcome"]["decision_calibration"]["runs"] == 0  # not a judgement of evidence


def test_seeded_sample_and_interrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(tmp_path)
    questions = tuple(
        EvalQuestion(id=str(i), question=q)
        for i, q in enumerate(["What is murder?", "What is theft?", "Punishment for murder?"] * 3)
    )
    first = run_eval(app, dataset(*questions), EvalConfig(limit=4, seed=7))
    again = run_eval(app, dataset(*questions), EvalConfig(limit=4, seed=7))
    ids = [r["id"] for r in first.records]
    assert ids == [r["id"] for r in again.records] and ids != ["0", "1", "2", "3"]
    calls = {"n": 0}
    real = app.agent.execute_agentic_search

    def interrupted_on_third(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(app.agent, "execute_agentic_search", interrupted_on_third)
    run = run_eval(app, dataset(*questions), EvalConfig())
    assert run.summary["interrupted"] is True
    assert [r["id"] for r in run.records] == ["0", "1"]
    assert run.summary["questions"] == 2 and run.summary["questions_planned"] == 9
    app.close()


def test_the_collection_holds_exactly_the_corpus(tmp_path: Path) -> None:
    app = make_app(tmp_path / "data")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "rivers.md").write_text("# Rivers\n\n## Nile\n\nThe Nile flows north.\n")
    (corpus / "hills.md").write_text("# Hills\n\n## Alps\n\nThe Alps are high.\n")
    q = EvalQuestion(id="n", question="Which way does the Nile flow?", gold_source_ids=("x",))
    both = EvalDataset(name="geo", questions=(q,), corpus=(corpus,), collection="geo")
    first = prepare_collection(app, both)
    assert first["ingest"]["added"] == 2 and first["gold_missing"] == ["x"]
    only_rivers = EvalDataset(
        name="geo", questions=(q,), corpus=(corpus / "rivers.md",), collection="geo"
    )
    second = prepare_collection(app, only_rivers)
    assert second["ingest"]["unchanged"] == 1
    assert [Path(p).name for p in second["ingest"]["removed_documents"]] == ["hills.md"]
    assert [Path(d.path).name for d in app.catalog.list_documents("geo")] == ["rivers.md"]
    app.close()
