"""Run an evaluation: ingest the corpus, answer every question, score each run, aggregate.

:func:`score_run` turns one :class:`~sleuth.service.AgentSearchResponse` into a flat
per-question record (retrieval, answer, citations, agent behaviour, latency, tokens);
:func:`summarize` aggregates the records; :func:`run_eval` does both over a dataset.
The metric definitions are in :mod:`sleuth.eval.metrics`.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sleuth.errors import UserError
from sleuth.eval.datasets import EvalDataset, EvalQuestion, Split, in_split
from sleuth.eval.metrics import (
    CragCalibration,
    all_in,
    answer_contains,
    answer_words,
    citation_scores,
    distinct,
    ends_mid_sentence,
    exact_match,
    f1_score,
    key_fact_share,
    lead_key_fact_share,
    mean,
    percentile,
    recall_at,
    reciprocal_rank,
    repeated_calls,
    repeated_sentences,
    stated_verdict,
    strip_citations,
)

KS = (1, 2, 5, 10, 20)
"""The cut-offs of recall@k and all-gold@k."""
JUDGED_STATUSES = ("completed", "insufficient_context")
"""Statuses of runs that ended on the agent's own judgement (answer or decline)."""
ANSWER_SCORES = (
    ("exact_match", exact_match),
    ("f1", f1_score),
    ("answer_contains", answer_contains),
)
"""The answer metrics of a record, each ``(prediction, gold answers) -> float``."""
FAIL_FAST_RUNS = 3
"""An evaluation stops when its first this-many runs all end in status ``error``."""


@dataclass(frozen=True)
class EvalConfig:
    """How to run an evaluation.

    Attributes:
        mode: ``react`` or ``guided``.
        limit: evaluate the first ``limit`` questions (``None``: all).
        use_memory: let runs recall earlier runs (off by default: an evaluation question
            must not be answered from the memory of another).
        max_iterations: the ReAct loop cap (``None``: the setting).
        timeout_s: per-run timeout (``None``: the setting).
        price_input_per_mtok / price_output_per_mtok: USD per million input / output tokens,
            to turn reported token counts into a cost (``None``: no cost).
        workers: questions run at once (threads; > 1 pays off when a remote model does the
            waiting, and makes each run's latency include contention).
        seed: shuffle the questions with this seed before ``limit`` (a random sample);
            ``None`` keeps the file order.
        split: ``dev``, ``test`` or ``all`` (:func:`~sleuth.eval.datasets.split_of`);
            taken before ``seed`` and ``limit``.
    """

    mode: str = "react"
    limit: int | None = None
    use_memory: bool = False
    max_iterations: int | None = None
    timeout_s: float | None = None
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    workers: int = 1
    seed: int | None = None
    split: Split = "all"

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise UserError(f"workers must be at least 1, got {self.workers}")


@dataclass
class EvalRun:
    """The per-question records and the summary of one evaluation."""

    records: list[dict[str, Any]]
    summary: dict[str, Any]
    calibration: CragCalibration = field(default_factory=CragCalibration)


def _cost(tokens: dict[str, int], config: EvalConfig) -> float | None:
    if config.price_input_per_mtok is None and config.price_output_per_mtok is None:
        return None
    if not tokens:
        return None
    return (
        tokens.get("input_tokens", 0) * (config.price_input_per_mtok or 0.0)
        + tokens.get("output_tokens", 0) * (config.price_output_per_mtok or 0.0)
    ) / 1e6


def score_run(
    question: EvalQuestion,
    response: Any,
    seconds: float,
    config: EvalConfig,
    calibration: CragCalibration | None = None,
) -> dict[str, Any]:
    """The record of one run: what it retrieved, cited and answered, scored against gold.

    Args:
        question: the evaluated question.
        response: the run's :class:`~sleuth.service.AgentSearchResponse`.
        seconds: the run's wall time.
        config: prices for the cost.
        calibration: collects the run's CRAG rounds (guided runs).

    Returns:
        A JSON-serialisable dict (one line of ``results.jsonl``).
    """
    trace = response.trace
    gold = set(question.gold_source_ids)
    retrieved = distinct(trace.get("retrieved_source_ids", []))
    cited = distinct(c.source_id for c in response.answer.citations)
    answer_text = response.answer.answer_text
    # EM/F1 score the short answer a model put first (the entity, date or yes/no), else the
    # whole answer; "answer contains gold" always reads the whole answer
    short = response.answer.short_answer
    prediction = strip_citations(answer_text)
    status = response.status.value
    # a decline is a run that ended in insufficient_context; an error or a timeout whose
    # fallback answer says "insufficient" is not the agent judging its evidence
    insufficient = status == "insufficient_context"
    precision, recall = citation_scores(cited, gold) if gold else (None, None)
    agentic = trace.get("agentic") or {}
    planning = agentic.get("planning") or {}
    reflections = agentic.get("reflection") or []
    tokens = {k: v for k, v in (trace.get("token_usage") or {}).items() if isinstance(v, int)}
    crag = agentic.get("crag") or []
    facts = key_fact_share(answer_text, question.key_facts)
    # the answer's first sentence: a wrong short answer is not saved by the quotes after it
    lead = lead_key_fact_share(answer_text, question.key_facts) if not question.verdict else None
    # a decline states no verdict, whatever word it opens with ("No section retrieved …")
    verdict = None if insufficient else stated_verdict(answer_text)
    all_gold = all_in(retrieved, gold) if gold else None
    record: dict[str, Any] = {
        "id": question.id,
        "split": question.split,
        "question": question.question,
        "type": question.type,
        "gold_source_ids": list(question.gold_source_ids),
        "answers": list(question.answers),
        "status": status,
        "insufficient_context": insufficient,
        "answer": answer_text,
        "cited": cited,
        "retrieved": retrieved,
        "recall_at": {str(k): recall_at(retrieved, gold, k) for k in KS} if gold else None,
        "all_gold_at": {str(k): all_in(retrieved[:k], gold) for k in KS} if gold else None,
        "all_gold_retrieved": all_gold,
        "mrr": reciprocal_rank(retrieved, gold) if gold else None,
        # an insufficient-context answer is not a prediction of the gold answer
        **{
            name: (
                0.0
                if insufficient
                else score(
                    short if short and name != "answer_contains" else prediction,
                    question.answers,
                )
            )
            if question.answers
            else None
            for name, score in ANSWER_SCORES
        },
        "short_answer": short,
        "answer_source": trace.get("answer_source"),
        "answer_replaced": trace.get("answer_replaced"),
        # judged sets: key facts stated, the yes/no verdict, declines that had the gold
        "key_facts": (0.0 if insufficient else facts) if facts is not None else None,
        "lead_key_facts": (0.0 if insufficient else lead) if lead is not None else None,
        "verdict": verdict,
        "verdict_correct": (verdict == question.verdict) if question.verdict else None,
        "out_of_scope": question.out_of_scope,
        "gold_cited": bool(gold & set(cited)) if gold else None,
        "declined_with_gold": (insufficient and bool(all_gold)) if gold else None,
        "ends_mid_sentence": ends_mid_sentence(answer_text),
        "answer_words": answer_words(answer_text),
        "repeated_sentences": repeated_sentences(answer_text),
        "queries": [
            str(c.get("arguments", {}).get("query"))
            for c in response.tool_calls
            if c.get("tool") == "rag_search"
        ],
        "citation_precision": precision,
        "citation_recall": recall,
        "citations_removed": len(trace.get("citations_removed") or []),
        "citations_unsupported": len(trace.get("citations_unsupported") or []),
        "ungrounded_sentences": len(response.answer.ungrounded_sentences),
        "steps": len(response.reasoning_steps),
        "iterations": int(trace.get("iterations") or 0),
        "tool_calls": len(response.tool_calls),
        "repeated_calls": repeated_calls(response.tool_calls),
        "refinements": int(trace.get("refinements") or 0),
        "replans": len(planning.get("replans") or []),
        "revisions": sum(1 for r in reflections if r.get("needs_revision")),
        "latency_s": round(seconds, 4),
        # where the run's time went, per stage (guided: retrieve, generate, repair, …)
        "timings_ms": trace.get("timings_ms") or {},
        "tokens": tokens,
        # the model's tokens per stage (generator, coverage, verdict, …): where a run's
        # prompt evaluation went
        "tokens_by_stage": trace.get("token_usage_by_stage") or {},
        "yes_no_check": trace.get("yes_no_check"),
        "quantity_check": trace.get("quantity_check"),
        "cost_usd": _cost(tokens, config),
        "error": trace.get("error") or _status_error(response),
    }
    if crag or response.mode == "guided":
        target = calibration if calibration is not None else CragCalibration()
        record["crag"] = target.add(question.question, crag, gold)
    return record


def _status_error(response: Any) -> str | None:
    """Why a run that ended in status ``error`` without an exception did so: the last thing
    its trace observed (e.g. a model whose replies could not be used)."""
    if response.status.value != "error":
        return None
    for step in reversed(response.reasoning_steps):
        if step.step_type.value in ("observe", "think") and step.content:
            return f"the run ended in status error; last step: {step.content[:300]}"
    return "the run ended in status error"


def _answer_sources(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Shares of ``answer_source`` among the runs whose answer a model wrote, and
    ``model_answer_kept``: kept or repaired *and* not turned into a decline — the model's
    own answer reached the user (a model's text replaced by "Insufficient context" is not
    kept)."""
    written = [r for r in records if r.get("answer_source") in ("model", "repaired", "replaced")]
    if not written:
        return {"model_answers": 0, "model_answer_kept": None}
    counts = Counter(r["answer_source"] for r in written)
    kept = sum(
        1
        for r in written
        if r["answer_source"] in ("model", "repaired") and not r["insufficient_context"]
    )
    return {
        "model_answers": len(written),
        "model_answer_kept": kept / len(written),
        "answer_sources": {k: counts[k] / len(written) for k in ("model", "repaired", "replaced")},
    }


def _judged(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The judged-set measures (records of questions with key facts, a verdict or marked
    out of scope): key facts stated, all key facts stated, gold cited, no ungrounded
    sentence, yes/no verdicts correct, declines with the gold retrieved, out-of-scope
    questions declined, and answers cut mid-sentence (over every run)."""
    in_corpus = [r for r in records if r.get("key_facts") is not None]
    verdicts = [r for r in records if r.get("verdict_correct") is not None]
    outside = [r for r in records if r.get("out_of_scope")]
    answered = [r for r in records if not r["insufficient_context"] and r["status"] != "error"]
    out: dict[str, Any] = {
        "mid_sentence": _share(answered, "ends_mid_sentence") if answered else None,
    }
    if in_corpus:
        out["judged"] = {
            "questions": len(in_corpus),
            "key_facts": _share(in_corpus, "key_facts"),
            "all_key_facts": mean(float(r["key_facts"] == 1.0) for r in in_corpus),
            "gold_cited": _share(in_corpus, "gold_cited"),
            "no_ungrounded": mean(float(r["ungrounded_sentences"] == 0) for r in in_corpus),
            "declined_with_gold": _share(in_corpus, "declined_with_gold"),
            "verdicts": len(verdicts),
            "verdict_correct": _share(verdicts, "verdict_correct") if verdicts else None,
        }
    if outside:
        out["out_of_scope"] = {
            "questions": len(outside),
            "declined": _share(outside, "insufficient_context"),
        }
    return out


def _share(records: Sequence[dict[str, Any]], key: str) -> float | None:
    return mean(None if r[key] is None else float(r[key]) for r in records)


def _decisions(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Answered vs insufficient-context, against whether all gold ids were retrieved."""
    rows = [
        r for r in records if r["all_gold_retrieved"] is not None and r["status"] in JUDGED_STATUSES
    ]
    table: dict[str, int] = Counter()
    for r in rows:
        decided = "insufficient" if r["insufficient_context"] else "answered"
        there = "gold_retrieved" if r["all_gold_retrieved"] else "gold_missing"
        table[f"{decided}/{there}"] += 1
    answered = table["answered/gold_retrieved"] + table["answered/gold_missing"]
    declined = table["insufficient/gold_retrieved"] + table["insufficient/gold_missing"]
    return {
        "runs": len(rows),
        "counts": {
            k: table[k]
            for k in (
                "answered/gold_retrieved",
                "answered/gold_missing",
                "insufficient/gold_retrieved",
                "insufficient/gold_missing",
            )
        },
        # when the agent answers, how often did it hold all the gold evidence?
        "answered_with_gold": table["answered/gold_retrieved"] / answered if answered else None,
        # when it declines, how often was the gold evidence really missing?
        "insufficient_without_gold": (
            table["insufficient/gold_missing"] / declined if declined else None
        ),
    }


def summarize(
    records: Sequence[dict[str, Any]],
    calibration: CragCalibration | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Aggregate per-question records into the summary written to ``summary.json``.

    Means skip questions a metric does not apply to (no gold ids, no gold answers, no
    citations); each section says over how many runs it was taken.
    """
    n = len(records)
    with_gold = [r for r in records if r["recall_at"] is not None]
    with_answers = [r for r in records if r["f1"] is not None]
    latencies = [r["latency_s"] for r in records]
    statuses = Counter(r["status"] for r in records)
    token_keys = sorted({k for r in records for k in r["tokens"]})
    costs = [r["cost_usd"] for r in records if r["cost_usd"] is not None]
    by_type: dict[str, dict[str, Any]] = {}
    for label in sorted({r["type"] for r in records if r["type"]}):
        group = [r for r in records if r["type"] == label]
        by_type[label] = {
            "questions": len(group),
            "all_gold_retrieved": _share(group, "all_gold_retrieved"),
            "mrr": _share(group, "mrr"),
            "f1": _share(group, "f1"),
            "citation_recall": _share(group, "citation_recall"),
            "insufficient_rate": _share(group, "insufficient_context"),
        }
    return {
        **(meta or {}),
        "questions": n,
        "retrieval": {
            "runs": len(with_gold),
            "recall_at": {str(k): mean(r["recall_at"][str(k)] for r in with_gold) for k in KS},
            "all_gold_at": {
                str(k): mean(float(r["all_gold_at"][str(k)]) for r in with_gold) for k in KS
            },
            "all_gold_retrieved": _share(with_gold, "all_gold_retrieved"),
            "mrr": _share(with_gold, "mrr"),
            "mean_retrieved_sections": mean(len(r["retrieved"]) for r in records),
        },
        "answer": {
            "runs": len(with_answers),
            "exact_match": _share(with_answers, "exact_match"),
            "f1": _share(with_answers, "f1"),
            "answer_contains": _share(with_answers, "answer_contains"),
            # of the runs whose answer a model wrote: kept as written / with citations
            # attached or after a repair round / replaced by the extractive answer
            **_answer_sources(records),
            **_judged(records),
        },
        "citations": {
            "runs_with_citations": sum(1 for r in records if r["cited"]),
            "precision": _share(records, "citation_precision"),
            "recall": _share(records, "citation_recall"),
            "mean_cited": mean(len(r["cited"]) for r in records),
            "removed": sum(r["citations_removed"] for r in records),
            "unsupported": sum(r["citations_unsupported"] for r in records),
            "ungrounded_sentences": sum(r["ungrounded_sentences"] for r in records),
        },
        "outcome": {
            "statuses": dict(statuses.most_common()),
            "insufficient_rate": _share(records, "insufficient_context") if n else None,
            "error_rate": statuses.get("error", 0) / n if n else None,
            "decision_calibration": _decisions(records),
        },
        "crag_calibration": calibration.summary() if calibration and calibration.runs else [],
        "agent": {
            key: mean(float(r[key]) for r in records)
            for key in (
                "steps",
                "iterations",
                "tool_calls",
                "repeated_calls",
                "refinements",
                "replans",
                "revisions",
            )
        },
        "latency_s": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "mean": mean(latencies),
            "max": max(latencies, default=None),
        },
        "tokens": {
            "reported": bool(token_keys),
            "total": {k: sum(r["tokens"].get(k, 0) for r in records) for k in token_keys},
            "mean_per_run": {
                k: mean(float(r["tokens"].get(k, 0)) for r in records) for k in token_keys
            },
            "cost_usd": sum(costs) if costs else None,
        },
        "by_type": by_type,
    }


def prepare_collection(
    app: Any, dataset: EvalDataset, collection: str | None = None, progress: Any = None
) -> dict[str, Any]:
    """Make the dataset's collection hold exactly its corpus, and check its gold ids.

    The corpus is ingested into ``dataset.collection`` (unchanged files are not re-embedded)
    and documents of that collection that are not in the corpus any more (left by an
    earlier evaluation with another corpus) are deleted, so the runs search this corpus and
    nothing else. With ``collection`` given, nothing is ingested and that existing
    collection is searched as it is.

    Returns:
        ``{"collection", "ingest": {...totals, "chunks_embedded", "seconds", "failures",
        "removed_documents"} or None, "gold_missing": [...]}``.

    Raises:
        UserError: every corpus file failed; the collection does not exist (with
            ``collection`` given, or when the dataset has no corpus).
    """
    name = collection or dataset.collection
    info: dict[str, Any] = {"collection": name, "ingest": None}
    if collection is None and dataset.corpus:
        started = time.perf_counter()
        report = app.pipeline.ingest(list(dataset.corpus), name, progress=progress)
        failed = report.by_status("failed")
        if report.files and len(failed) == len(report.files):
            raise UserError(
                "the corpus could not be ingested: "
                + "; ".join(f"{f.path}: {f.message}" for f in failed)
            )
        keep = {f.doc_id for f in report.files if f.doc_id}
        removed = []
        for document in app.catalog.list_documents(name):
            if document.doc_id not in keep:
                app.pipeline.delete(name, document.doc_id)
                removed.append(document.path or document.doc_id)
        info["ingest"] = {
            **report.totals,
            "chunks_embedded": report.n_embedded,
            "seconds": round(time.perf_counter() - started, 2),
            "failures": [f"{f.path}: {f.message}" for f in failed],
            "removed_documents": removed,
        }
    elif app.catalog.get_collection(name) is None:
        if collection is not None:
            raise UserError(
                f"collection '{name}' does not exist; leave out --collection to build "
                f"'{dataset.collection}' from the dataset's corpus"
            )
        raise UserError(
            f"the dataset '{dataset.name}' names no corpus and '{name}' does not exist yet; "
            "give the corpus with --corpus FILE_OR_DIR, or search an existing collection "
            "with --collection NAME"
        )
    known = {source_id for source_id, _ in app.catalog.all_section_keys(name)}
    gold = {g for q in dataset.questions for g in q.gold_source_ids}
    info["gold_missing"] = sorted(gold - known)
    return info


class EvalAborted(UserError):
    """The first runs of an evaluation all failed (e.g. the model cannot be reached)."""


def _machine() -> dict[str, Any]:
    """Facts that move latency: host, cores, load average, versions."""
    import os
    import platform

    from sleuth import __version__

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on POSIX
        load = []
    return {
        "host": platform.node(),
        "cores": os.cpu_count(),
        "load_average": load,
        "python": platform.python_version(),
        "sleuth": __version__,
    }


def run_eval(
    app: Any,
    dataset: EvalDataset,
    config: EvalConfig,
    collection: str | None = None,
    on_question: Callable[[int, dict[str, Any]], None] | None = None,
    prepared: dict[str, Any] | None = None,
) -> EvalRun:
    """Evaluate ``dataset`` with ``app`` (a :class:`sleuth.app.Sleuth`).

    The questions are the dataset's, shuffled with ``config.seed`` when one is given, then
    cut to ``config.limit``. One warm-up search first loads the models, so the first
    question's latency is not a cold start. Ctrl-C (``KeyboardInterrupt``) stops the
    evaluation after the runs in progress: the runs done so far are returned, with
    ``summary["interrupted"]`` true.

    Args:
        app: the installation to evaluate (its settings pick the reasoner and backends).
        dataset: questions and corpus.
        config: mode, limit, memory, prices, workers.
        collection: search this existing collection (default: ``dataset.collection``, built
            from the corpus).
        on_question: called after each run with its index and record (progress bars).
        prepared: what :func:`prepare_collection` returned, when the caller already
            prepared the collection (to show its own ingest progress); otherwise it is
            prepared here.

    Returns:
        The records (in question order) and the summary.

    Raises:
        UserError: bad mode, the collection cannot be prepared.
        EvalAborted: the first :data:`FAIL_FAST_RUNS` runs all ended in status ``error``
            (the message quotes the first error).
        SleuthError: a failure that would fail every run (unknown collection, model
            mismatch); a single run's failure is recorded in its record instead.
    """
    if config.mode not in ("react", "guided"):
        raise UserError(f"unknown mode '{config.mode}': use 'react' or 'guided'")
    name = collection or dataset.collection
    questions = in_split(dataset.questions, config.split)
    if config.seed is not None:
        random.Random(config.seed).shuffle(questions)
    questions = questions[: config.limit] if config.limit else questions
    started_at = dt.datetime.now(dt.UTC)
    if prepared is None:
        prepared = prepare_collection(app, dataset, collection)
    machine = _machine()
    app.kb.search(name, questions[0].question if questions else "warm up", k=1)  # warm-up
    calibration = CragCalibration()
    records: list[dict[str, Any]] = []
    wall = time.perf_counter()

    def ask(question: EvalQuestion) -> tuple[Any, float]:
        t0 = time.perf_counter()
        try:
            response: Any = app.agent.execute_agentic_search(
                question.question,
                name,
                mode=config.mode,
                max_iterations=config.max_iterations,
                timeout_s=config.timeout_s,
                use_memory=config.use_memory,
            )
        except UserError as exc:  # this question only (e.g. too long)
            response = exc
        return response, time.perf_counter() - t0

    interrupted = False
    pool = ThreadPoolExecutor(max_workers=config.workers)
    try:
        # submitted a few at a time and collected in question order: records (and CRAG
        # rounds) do not depend on timing, and an interrupt leaves little to cancel
        pending: dict[int, Future[tuple[Any, float]]] = {}
        for index, question in enumerate(questions):
            for ahead in range(index, min(index + config.workers, len(questions))):
                if ahead not in pending:
                    pending[ahead] = pool.submit(ask, questions[ahead])
            response, seconds = pending.pop(index).result()
            if isinstance(response, UserError):
                record = _failed_record(question, str(response), seconds, config)
            else:
                record = score_run(question, response, seconds, config, calibration)
            records.append(record)
            if on_question is not None:
                on_question(index, record)
            if len(records) == min(FAIL_FAST_RUNS, len(questions)) and all(
                r["status"] == "error" for r in records
            ):
                which = "the only run" if len(records) == 1 else f"the first {len(records)} runs"
                raise EvalAborted(
                    f"{which} ended in status error, so the evaluation stopped: "
                    f"{records[0]['error']}"
                )
    except KeyboardInterrupt:
        interrupted = True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    settings = app.settings
    meta = {
        "dataset": dataset.name,
        "dataset_source": dataset.source,
        "corpus": [str(p) for p in dataset.corpus] if collection is None else [],
        "mode": config.mode,
        "reasoner": app.agent.reasoner.name,
        "llm": settings.llm,
        "index_backend": settings.index_backend,
        "embedding_model": settings.embedding_model,
        "collection": prepared,
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - wall, 2),
        "interrupted": interrupted,
        "questions_planned": len(questions),
        "settings": {
            "max_iterations": config.max_iterations or settings.max_iterations,
            "timeout_s": config.timeout_s or settings.run_timeout_s,
            "use_memory": config.use_memory,
            "limit": config.limit,
            "seed": config.seed,
            "split": config.split,
            "workers": config.workers,
            "planner": settings.planner,
            "reflection": settings.reflection,
            "strict_grounding": settings.strict_grounding,
        },
        "machine_at_start": machine,
        "load_average_at_end": _machine()["load_average"],
        "ks": list(KS),
    }
    return EvalRun(records, summarize(records, calibration, meta), calibration)


def _failed_record(
    question: EvalQuestion, message: str, seconds: float, config: EvalConfig
) -> dict[str, Any]:
    """The record of a question that could not be run: scored like a run that ended in
    status ``error`` with nothing retrieved (a miss on every metric that applies)."""
    from sleuth.agents.answer import GeneratedAnswer
    from sleuth.agents.state import RunStatus
    from sleuth.service import AgentSearchResponse

    response = AgentSearchResponse(
        task_id="",
        query=question.question,
        collection="",
        mode=config.mode,
        status=RunStatus.ERROR,
        answer=GeneratedAnswer(answer_text=""),
        reasoning_steps=[],
        trace={"error": message},
    )
    return score_run(question, response, seconds, config)


__all__ = [
    "KS",
    "EvalConfig",
    "EvalRun",
    "prepare_collection",
    "run_eval",
    "score_run",
    "summarize",
]
