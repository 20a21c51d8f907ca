"""Metric definitions of ``sleuth eval``: ranked lists, answer match, citations, calibration."""

from __future__ import annotations

import pytest

from sleuth.eval.metrics import (
    CragCalibration,
    all_in,
    answer_contains,
    citation_scores,
    distinct,
    exact_match,
    f1_score,
    mean,
    normalize_answer,
    percentile,
    recall_at,
    reciprocal_rank,
    repeated_calls,
    strip_citations,
)


def test_normalisation_follows_hotpotqa() -> None:
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("  ") == ""


def test_exact_match_and_f1_take_the_best_gold_answer() -> None:
    assert exact_match("the Eiffel tower.", ["Eiffel Tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    # "big cat" vs "cat": precision 1/2, recall 1 -> F1 2/3
    assert f1_score("the big cat", ["a cat"]) == pytest.approx(2 / 3)
    assert f1_score("the big cat", ["dog", "big cat"]) == 1.0
    assert f1_score("anything", []) == 0.0


def test_yes_no_answers_score_only_by_exact_match() -> None:
    assert f1_score("yes they are", ["yes"]) == 0.0  # as in hotpot_evaluate_v1
    assert f1_score("yes", ["yes"]) == 1.0
    assert f1_score("no", ["yes"]) == 0.0


def test_answer_contains_matches_whole_words_only() -> None:
    assert answer_contains("It was a spirit of the air [X].", ["a spirit"]) == 1.0
    assert answer_contains("Cats are a category.", ["cat"]) == 0.0
    assert answer_contains("Anything", [""]) == 0.0


def test_ranked_list_metrics() -> None:
    ranked = ["A", "B", "C", "D"]
    assert recall_at(ranked, {"B", "D"}, 2) == 0.5
    assert recall_at(ranked, {"B", "D"}, 4) == 1.0
    assert recall_at(ranked, set(), 4) == 0.0
    assert all_in(ranked[:2], {"A", "B"}) and not all_in(ranked[:2], {"A", "C"})
    assert not all_in(ranked, set())
    assert reciprocal_rank(ranked, {"C", "D"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, {"Z"}) == 0.0
    assert distinct(["A", None, "A", "", "B"]) == ["A", "B"]


def test_citation_scores_skip_what_they_cannot_judge() -> None:
    assert citation_scores(["A", "B"], {"A", "C"}) == (0.5, 0.5)
    assert citation_scores([], {"A"}) == (None, 0.0)
    assert citation_scores(["A"], set()) == (0.0, None)


def test_repeated_calls_count_same_tool_and_arguments() -> None:
    trace = [
        {"tool": "rag_search", "arguments": {"query": "x", "top_k": 5}},
        {"tool": "rag_search", "arguments": {"top_k": 5, "query": "x"}},  # same, other order
        {"tool": "rag_search", "arguments": {"query": "y"}},
        {"tool": "read_section", "arguments": {"query": "x", "top_k": 5}},
        {"tool": "rag_search", "arguments": {"query": "x", "top_k": 5}},
    ]
    assert repeated_calls(trace) == 2


def test_crag_calibration_judges_sub_questions_on_one_gold_id() -> None:
    cal = CragCalibration()
    q = "Who founded A and when was B built?"
    rounds = [
        {"verdict": "SUFFICIENT", "question": q, "evidence_source_ids": ["A", "B", "X"]},
        {"verdict": "SUFFICIENT", "question": "Who founded A?", "evidence_source_ids": ["A"]},
        {"verdict": "INSUFFICIENT", "question": q, "evidence_source_ids": ["X"]},
    ]
    compact = cal.add(q, rounds, {"A", "B"})
    assert [c["gold_there"] for c in compact] == [True, True, False]
    cal.add("other", [], {"A"})
    summary = {s["verdict"]: s for s in cal.summary()}
    assert summary["SUFFICIENT"]["rounds"] == 2
    assert summary["SUFFICIENT"]["gold_there"] == 1.0
    assert summary["SUFFICIENT"]["all_gold_in_evidence"] == 0.5  # the sub-question round
    assert summary["INSUFFICIENT"]["gold_there"] == 0.0
    assert summary["all"]["rounds"] == 3 and cal.runs_without_rounds == 1
    assert summary["SUFFICIENT"]["rounds_of_decomposed_runs"] == 2


def test_percentile_and_mean_handle_empty_input() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert mean([None, 1.0, 3.0]) == 2.0
    assert mean([None]) is None


def test_citation_markers_are_not_part_of_the_answer() -> None:
    assert strip_citations("Death or life imprisonment [BNS_S103] [2].") == (
        "Death or life imprisonment."
    )
    assert exact_match(strip_citations("Paris [France_capital]"), ["Paris"]) == 1.0
