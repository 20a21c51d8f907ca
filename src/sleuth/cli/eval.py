"""``sleuth eval`` and ``sleuth eval compare``: evaluate on a dataset, compare two runs."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_ERROR, EXIT_USAGE, JsonOpt, err
from sleuth.config import Settings, validation_messages
from sleuth.errors import SleuthError

if TYPE_CHECKING:
    from sleuth.app import Sleuth
    from sleuth.eval.datasets import EvalDataset
    from sleuth.eval.runner import EvalConfig, EvalRun

eval_app = typer.Typer(
    help="Evaluate sleuth on a dataset (retrieval, answers, citations, agent behaviour), or "
    "compare two evaluations. Run: sleuth eval --dataset hotpotqa|statutes|musique|PATH.",
    invoke_without_command=True,
)


@eval_app.callback(invoke_without_command=True)
def eval_run(
    ctx: typer.Context,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "-d",
            help="hotpotqa, statutes, or a JSONL file (or folder with questions.jsonl)",
        ),
    ] = None,
    mode: Annotated[str, typer.Option(help="react | guided")] = "react",
    llm: Annotated[
        str | None, typer.Option(help="Reasoner for this run (default: SLEUTH_LLM)")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions")] = None,
    split: Annotated[
        str,
        typer.Option(help="dev | test | all: the fixed half of the set (a hash of each id)"),
    ] = "all",
    out: Annotated[
        Path | None,
        typer.Option(help="Results folder (default: eval-results/<dataset>-<mode>-<llm>-<time>)"),
    ] = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option(help="Corpus file or folder to ingest for your own dataset (repeatable)"),
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option("--collection", "-c", help="Search this existing collection (no ingest)"),
    ] = None,
    data_root: Annotated[
        Path | None,
        typer.Option(help="Folder holding hotpotqa/ and statutes/ (default: ../shared/data)"),
    ] = None,
    memory: Annotated[
        bool, typer.Option("--memory", help="Let runs recall earlier runs (off by default)")
    ] = False,
    max_iterations: Annotated[int | None, typer.Option(min=1, help="ReAct loop cap")] = None,
    timeout_s: Annotated[float | None, typer.Option(min=0.1, help="Per-run timeout (s)")] = None,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Questions run at once (for remote models)")
    ] = 1,
    seed: Annotated[
        int | None,
        typer.Option(help="Shuffle the questions with this seed first (--limit: a sample)"),
    ] = None,
    price_in: Annotated[
        float | None, typer.Option(min=0.0, help="USD per million input tokens (for cost)")
    ] = None,
    price_out: Annotated[
        float | None, typer.Option(min=0.0, help="USD per million output tokens (for cost)")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON (no progress bar)")
    ] = False,
) -> None:
    """Evaluate on a dataset: per-question JSONL, summary JSON, Markdown report, PNG plots."""
    if ctx.invoked_subcommand is not None:
        return
    if dataset is None:
        raise common.fail(
            "give --dataset: hotpotqa, statutes, or the path of your JSONL questions "
            "(see 'sleuth eval --help')",
            EXIT_USAGE,
        )
    mode = mode.strip().lower()
    if mode not in ("react", "guided"):
        raise common.fail(f"--mode must be react or guided, not '{mode}'", EXIT_USAGE)
    split = split.strip().lower()
    if split not in ("dev", "test", "all"):
        raise common.fail(f"--split must be dev, test or all, not '{split}'", EXIT_USAGE)
    if corpus and collection is not None:
        raise common.fail(
            "--corpus and --collection exclude each other: the corpus is ingested into the "
            "dataset's own collection, --collection searches an existing one as it is",
            EXIT_USAGE,
        )
    from sleuth.eval.datasets import load_dataset
    from sleuth.eval.report import write_results
    from sleuth.eval.runner import EvalConfig, run_eval

    try:
        data = load_dataset(dataset, data_root, corpus or ())
    except SleuthError as exc:
        raise common.fail(str(exc), EXIT_USAGE) from exc
    if collection is not None:
        collection = common.collection_name(collection)
    config = EvalConfig(
        mode=mode,
        limit=limit,
        use_memory=memory,
        max_iterations=max_iterations,
        timeout_s=timeout_s,
        price_input_per_mtok=price_in,
        price_output_per_mtok=price_out,
        workers=workers,
        seed=seed,
        split=split,  # type: ignore[arg-type]
    )
    s = _eval_sleuth(llm)
    folder = _results_folder(out, data.name, mode, s.settings.llm)
    from sleuth.eval.datasets import in_split

    in_scope = len(in_split(data.questions, split))
    total = min(limit or in_scope, in_scope)
    try:
        if as_json:
            run = run_eval(s, data, config, collection)
        else:
            run = _eval_with_progress(s, data, config, collection, total)
        files = write_results(run, folder)
    except SleuthError as exc:
        _remove_if_empty(folder)
        raise common.fail(str(exc)) from exc
    except BaseException:
        _remove_if_empty(folder)
        raise
    finally:
        s.close()
    summary = run.summary
    if as_json:
        typer.echo(json.dumps({**summary, "results_dir": str(folder)}, indent=2))
    else:
        _print_eval_summary(summary)
        for warning in _eval_warnings(run):
            err.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)
        typer.echo(f"results: {folder}/ ({', '.join(f.name for f in files)})")
    if summary["interrupted"]:
        err.print(
            f"interrupted after {summary['questions']} of {summary['questions_planned']} "
            f"questions; the results of those are in {folder}/",
            soft_wrap=True,
        )
        raise typer.Exit(130)
    if summary["questions"] and summary["outcome"]["error_rate"] == 1.0:
        raise typer.Exit(EXIT_ERROR)


def _results_folder(out: Path | None, dataset: str, mode: str, llm: str) -> Path:
    """The results folder, created now (empty), so a bad path fails before any run.

    The default ``eval-results/<dataset>-<mode>-<llm>-<time>`` gets ``-2``, ``-3``... when
    another evaluation started in the same second.
    """
    if out is not None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise common.fail(f"{out} exists and is not empty; choose another --out", EXIT_USAGE)
        candidates = [out]
    else:
        slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in llm)
        base = Path("eval-results") / f"{dataset}-{mode}-{slug}-{time.strftime('%Y%m%d-%H%M%S')}"
        candidates = [base, *(base.with_name(f"{base.name}-{n}") for n in range(2, 100))]
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=out is not None)
            probe = folder / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
            return folder
        except FileExistsError:
            continue
        except OSError as exc:
            raise common.fail(
                f"cannot write the results to {folder}: {exc.strerror or exc}", EXIT_USAGE
            ) from exc
    raise common.fail(f"could not create a results folder next to {candidates[0]}", EXIT_USAGE)


def _remove_if_empty(folder: Path) -> None:
    """Remove the results folder (and a default ``eval-results/`` parent) if still empty."""
    with contextlib.suppress(OSError):
        folder.rmdir()  # only if nothing was written
        if folder.parent.name == "eval-results":
            folder.parent.rmdir()


def _eval_warnings(run: EvalRun) -> list[str]:
    """What a user must not miss: failed runs, missing gold ids, corpus problems."""
    s = run.summary
    warnings = []
    errors = [r for r in run.records if r["status"] == "error"]
    if errors:
        warnings.append(
            f"{len(errors)} of {s['questions']} runs ended in status error (scored as "
            f"misses); the first: {errors[0]['error']}"
        )
    missing = s["collection"].get("gold_missing") or []
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        warnings.append(
            f"{len(missing)} gold source ids are not in collection "
            f"'{s['collection']['collection']}' ({shown}); questions citing them cannot score "
            "full recall — check the ids with 'sleuth search'"
        )
    ingest = s["collection"].get("ingest") or {}
    for failure in ingest.get("failures") or []:
        warnings.append(f"corpus file not ingested: {failure}")
    removed = ingest.get("removed_documents") or []
    if removed:
        warnings.append(
            f"removed {len(removed)} documents that are no longer in the corpus from "
            f"'{s['collection']['collection']}': {', '.join(removed[:5])}"
        )
    return warnings


def _eval_sleuth(llm: str | None) -> Sleuth:
    """A Sleuth whose reasoner is ``llm`` (when given) and the other settings as configured."""
    if llm is None:
        return common.open_sleuth()
    from pydantic import ValidationError

    from sleuth.app import Sleuth
    from sleuth.llm.factory import parse_llm_spec

    try:
        parse_llm_spec(llm)
    except SleuthError as exc:
        message = str(exc).replace("SLEUTH_LLM=", "")
        raise common.fail(f"--llm: {message}", EXIT_USAGE) from exc
    try:
        settings = Settings(llm=llm)
    except ValidationError as exc:
        for field, line in validation_messages(exc).items():
            common.error_line(f"--llm: {line}" if field == "llm" else line)
        raise typer.Exit(EXIT_USAGE) from exc
    return Sleuth(settings)


def _eval_with_progress(
    s: Sleuth, data: EvalDataset, config: EvalConfig, collection: str | None, total: int
) -> EvalRun:
    """:func:`~sleuth.eval.runner.run_eval` with a progress bar (and one for the ingest)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from sleuth.eval.runner import prepare_collection, run_eval
    from sleuth.ingest.progress import RichProgress

    found = {"gold": 0, "runs": 0}
    bar = Progress(
        "[bold]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        "{task.fields[detail]}",
        console=err,
    )
    task = bar.add_task(f"{data.name} {config.mode}", total=total, detail="", start=False)

    def on_question(_index: int, record: dict[str, Any]) -> None:
        if record["all_gold_retrieved"] is not None:
            found["runs"] += 1
            found["gold"] += bool(record["all_gold_retrieved"])
        detail = f"all gold retrieved {found['gold'] / found['runs']:.2f}" if found["runs"] else ""
        bar.start_task(task)
        bar.update(task, advance=1, detail=detail)

    if data.corpus and collection is None:
        with RichProgress(err) as ingest_progress:
            prepared = prepare_collection(s, data, collection, ingest_progress)
    else:
        prepared = prepare_collection(s, data, collection)
    with bar:
        return run_eval(s, data, config, collection, on_question, prepared)


def _print_eval_summary(summary: dict[str, Any]) -> None:
    from sleuth.eval.report import fmt_value

    r, a, c, o = summary["retrieval"], summary["answer"], summary["citations"], summary["outcome"]
    table = Table(title=f"{summary['dataset']} · {summary['mode']} · {summary['reasoner']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("questions", summary["questions"]),
        ("recall@5 / @10", f"{fmt_value(r['recall_at']['5'])} / {fmt_value(r['recall_at']['10'])}"),
        ("all gold retrieved", r["all_gold_retrieved"]),
        ("MRR", r["mrr"]),
        ("exact match / F1", f"{fmt_value(a['exact_match'])} / {fmt_value(a['f1'])}"),
        ("answer contains gold", a["answer_contains"]),
        ("citation precision / recall", f"{fmt_value(c['precision'])} / {fmt_value(c['recall'])}"),
        ("insufficient-context rate", o["insufficient_rate"]),
        ("error rate", o["error_rate"]),
        ("tool calls per run", summary["agent"]["tool_calls"]),
        (
            "latency p50 / p95 (s)",
            f"{fmt_value(summary['latency_s']['p50'])} / {fmt_value(summary['latency_s']['p95'])}",
        ),
    ]
    for name, value in rows:
        table.add_row(name, value if isinstance(value, str) else fmt_value(value))
    common.stdout_console().print(table)


@eval_app.command("compare")
def eval_compare(
    a: Annotated[Path, typer.Argument(help="Results folder A (or its summary.json)")],
    b: Annotated[Path, typer.Argument(help="Results folder B (or its summary.json)")],
    as_json: JsonOpt = False,
) -> None:
    """Print two evaluations side by side with deltas (B - A)."""
    from sleuth.eval.report import (
        changed_questions,
        comparability_warnings,
        compare_rows,
        describe,
        fmt_value,
        load_summary,
    )

    try:
        sa, sb = load_summary(a), load_summary(b)
    except SleuthError as exc:
        raise common.fail(str(exc), EXIT_USAGE) from exc
    rows = compare_rows(sa, sb)
    warnings = comparability_warnings(sa, sb)
    changed = changed_questions(a, b)
    if as_json:
        payload = {"a": str(a), "b": str(b), "warnings": warnings, "rows": rows}
        typer.echo(json.dumps({**payload, "changed_questions": changed}))
        return
    for warning in warnings:
        err.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)
    out = common.stdout_console()
    out.print(f"A: {a} ({describe(sa)})", soft_wrap=True)
    out.print(f"B: {b} ({describe(sb)})", soft_wrap=True)
    table = Table()
    for name, justify in (("metric", "left"), ("A", "right"), ("B", "right"), ("B - A", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        delta = row["delta"]
        text = "–" if delta is None else f"{delta + 0.0:+.3f}" if abs(delta) >= 5e-4 else "0"
        style = {"b": "green", "a": "red"}.get(row["better"] or "", "")
        table.add_row(
            row["metric"], fmt_value(row["a"]), fmt_value(row["b"]), Text(text, style=style)
        )
    out.print(table)
    if changed:
        shown = Table(title=f"Questions whose outcome changed ({len(changed)}; first 20)")
        for name in ("id", "question", "what", "A", "B"):
            shown.add_column(name)
        for c in changed[:20]:
            shown.add_row(c["id"], c["question"], c["change"], fmt_value(c["a"]), fmt_value(c["b"]))
        out.print(shown)
