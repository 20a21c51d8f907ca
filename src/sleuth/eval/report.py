"""Evaluation output: the results folder (JSONL, summary, Markdown report, plots) and the
side-by-side comparison of two results folders.

Folder layout written by :func:`write_results`::

    results.jsonl        one record per question (sleuth.eval.runner.score_run)
    summary.json         the aggregate (sleuth.eval.runner.summarize)
    report.md            the summary as Markdown tables, with the plots
    recall_at_k.png      recall@k and all-gold@k against k
    latency.png          distribution of run latency, p50 / p95 marked
    calibration.png      CRAG verdicts (guided) and answer/decline decisions vs gold evidence
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.errors import UserError
from sleuth.eval.metrics import CRAG_TABLE_HEADERS
from sleuth.eval.runner import EvalRun

SUMMARY = "summary.json"
RESULTS = "results.jsonl"
REPORT = "report.md"
PLOTS = ("recall_at_k.png", "latency.png", "calibration.png")
MAX_MISSES_SHOWN = 10

# (label, path in summary.json, higher is better?) for `sleuth eval compare`
COMPARED: tuple[tuple[str, tuple[str, ...], bool | None], ...] = (
    *((f"recall@{k}", ("retrieval", "recall_at", str(k)), True) for k in (1, 2, 5, 10, 20)),
    *((f"all-gold@{k}", ("retrieval", "all_gold_at", str(k)), True) for k in (5, 10)),
    ("all gold retrieved", ("retrieval", "all_gold_retrieved"), True),
    ("MRR", ("retrieval", "mrr"), True),
    ("sections retrieved", ("retrieval", "mean_retrieved_sections"), None),
    ("exact match", ("answer", "exact_match"), True),
    ("F1", ("answer", "f1"), True),
    ("answer contains gold", ("answer", "answer_contains"), True),
    ("citation precision", ("citations", "precision"), True),
    ("citation recall", ("citations", "recall"), True),
    ("insufficient-context rate", ("outcome", "insufficient_rate"), None),
    ("error rate", ("outcome", "error_rate"), False),
    ("answered with gold", ("outcome", "decision_calibration", "answered_with_gold"), True),
    (
        "declined without gold",
        ("outcome", "decision_calibration", "insufficient_without_gold"),
        True,
    ),
    ("removed citations", ("citations", "removed"), False),
    ("unsupported citations", ("citations", "unsupported"), False),
    ("ungrounded sentences", ("citations", "ungrounded_sentences"), False),
    ("steps", ("agent", "steps"), None),
    ("tool calls", ("agent", "tool_calls"), None),
    ("repeated calls", ("agent", "repeated_calls"), False),
    ("refinement rounds", ("agent", "refinements"), None),
    ("latency p50 (s)", ("latency_s", "p50"), False),
    ("latency p95 (s)", ("latency_s", "p95"), False),
    ("total tokens", ("tokens", "total", "total_tokens"), False),
    ("cost (USD)", ("tokens", "cost_usd"), False),
)


def write_results(run: EvalRun, out_dir: Path) -> list[Path]:
    """Write the results folder (see the module docstring); return the files written.

    Plots need matplotlib; it is a dependency of sleuth, so a failure to draw one is an
    error, not a silent gap.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / RESULTS, "w", encoding="utf-8") as f:
        for record in run.records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    (out_dir / SUMMARY).write_text(
        json.dumps(run.summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    plots = write_plots(run, out_dir)
    (out_dir / REPORT).write_text(markdown_report(run, plots), encoding="utf-8")
    return [out_dir / RESULTS, out_dir / SUMMARY, out_dir / REPORT, *plots]


def write_plots(run: EvalRun, out_dir: Path) -> list[Path]:
    """Draw the three PNG plots into ``out_dir``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = run.summary
    title = f"{s.get('dataset')} · {s.get('mode')} · {s.get('reasoner')}"
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(6, 4))
    ks = [int(k) for k in s["retrieval"]["recall_at"]]
    for key, label in (("recall_at", "recall@k"), ("all_gold_at", "all-gold@k")):
        values = [s["retrieval"][key][str(k)] for k in ks]
        if any(v is not None for v in values):
            ax.plot(ks, [math.nan if v is None else v for v in values], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("k (sections, in order of first retrieval)")
    ax.set_ylabel("share")
    ax.set_title(f"Retrieval — {title}", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no question has gold source ids", ha="center", transform=ax.transAxes)
    written.append(_save(fig, out_dir / PLOTS[0]))

    fig, ax = plt.subplots(figsize=(6, 4))
    latencies = [r["latency_s"] for r in run.records]
    ax.hist(latencies, bins=min(30, max(5, len(latencies) // 3)), color="#4a7ab5")
    for name, style in (("p50", "--"), ("p95", ":")):
        value = s["latency_s"][name]
        if value is not None:
            ax.axvline(value, color="black", linestyle=style, label=f"{name} {value:.3f} s")
    ax.set_xlabel("run latency (s)")
    ax.set_ylabel("questions")
    ax.set_title(f"Latency — {title}", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    written.append(_save(fig, out_dir / PLOTS[1]))

    crag = [c for c in s.get("crag_calibration") or [] if c["verdict"] != "all"]
    decisions = s["outcome"]["decision_calibration"]
    fig, axes = plt.subplots(1, 2 if crag else 1, figsize=(10 if crag else 5.5, 4))
    axes = list(axes) if crag else [axes]
    if crag:
        ax = axes.pop(0)
        names = [c["verdict"] for c in crag]
        values = [c["gold_there"] for c in crag]
        bars = ax.bar(names, values, color="#5b9e6b")
        for bar, c in zip(bars, crag, strict=True):
            ax.annotate(
                f"n={c['rounds']}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("share of rounds with the gold in the evidence")
        ax.set_title("CRAG verdict vs gold evidence", fontsize=10)
    ax = axes[0]
    counts = decisions["counts"]
    labels = ["answered", "insufficient"]
    with_gold = [counts[f"{d}/gold_retrieved"] for d in labels]
    without = [counts[f"{d}/gold_missing"] for d in labels]
    ax.bar(labels, with_gold, label="all gold retrieved", color="#5b9e6b")
    ax.bar(labels, without, bottom=with_gold, label="gold missing", color="#c4704f")
    ax.set_ylabel("runs")
    ax.set_title("Answer or decline vs gold evidence", fontsize=10)
    if decisions["runs"]:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no judged run with gold ids", ha="center", transform=ax.transAxes)
    fig.suptitle(title, fontsize=10)
    written.append(_save(fig, out_dir / PLOTS[2]))
    return written


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fmt_value(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt_value(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_report(run: EvalRun, plots: Sequence[Path] = ()) -> str:
    """The summary as a Markdown document (plots linked by file name)."""
    s = run.summary
    names = {p.name for p in plots}
    collection = s.get("collection") or {}
    ingest = collection.get("ingest") or {}
    out = [
        f"# sleuth eval — {s.get('dataset')}, {s.get('mode')} mode",
        "",
        md_table(
            ["", ""],
            [
                ["questions", s["questions"]],
                ["questions file", s.get("dataset_source")],
                ["reasoner", f"{s.get('reasoner')} (SLEUTH_LLM={s.get('llm')})"],
                [
                    "index backend / embedding model",
                    f"{s.get('index_backend')} / {s.get('embedding_model')}",
                ],
                ["collection", collection.get("collection")],
                ["ingest", _ingest_line(ingest)],
                [
                    "gold ids missing from the collection",
                    ", ".join(collection.get("gold_missing") or []) or "none",
                ],
                ["memory", "on" if s.get("use_memory") else "off"],
                ["started (UTC) / wall time", f"{s.get('started_at')} / {s.get('wall_s')} s"],
            ],
        ),
        "",
        f"## Retrieval ({s['retrieval']['runs']} runs with gold source ids)",
        "",
        "Over the distinct source ids each run retrieved, in order of first retrieval.",
        "",
        md_table(
            ["k", "recall@k", "all-gold@k"],
            [
                [k, s["retrieval"]["recall_at"][k], s["retrieval"]["all_gold_at"][k]]
                for k in s["retrieval"]["recall_at"]
            ],
        ),
        "",
        f"All gold retrieved: {fmt_value(s['retrieval']['all_gold_retrieved'])} · MRR: "
        f"{fmt_value(s['retrieval']['mrr'])} · sections retrieved per run: "
        f"{fmt_value(s['retrieval']['mean_retrieved_sections'])}",
        "",
    ]
    if "recall_at_k.png" in names:
        out += ["![recall@k](recall_at_k.png)", ""]
    a = s["answer"]
    c = s["citations"]
    out += [
        f"## Answers ({a['runs']} runs with gold answers)",
        "",
        md_table(
            ["exact match", "F1", "answer contains gold"],
            [[a["exact_match"], a["f1"], a["answer_contains"]]],
        ),
        "",
        "HotpotQA/SQuAD answer normalisation; an insufficient-context answer scores 0. Exact "
        "match and F1 are meaningful when the model writes short answers; sleuth's cited, "
        "sentence-long answers are better read through 'answer contains gold'.",
        "",
        "## Citations",
        "",
        md_table(
            [
                "precision",
                "recall",
                "runs citing",
                "mean cited",
                "removed",
                "unsupported",
                "ungrounded sentences",
            ],
            [
                [
                    c["precision"],
                    c["recall"],
                    c["runs_with_citations"],
                    c["mean_cited"],
                    c["removed"],
                    c["unsupported"],
                    c["ungrounded_sentences"],
                ]
            ],
        ),
        "",
        "Precision over runs that cite; recall over runs with gold ids; removed = markers of "
        "sections the run never retrieved, unsupported = markers the cited section does not "
        "support (both taken out of the answer by the citation check).",
        "",
    ]
    o = s["outcome"]
    d = o["decision_calibration"]
    out += [
        "## Outcomes",
        "",
        md_table(["status", "runs"], list(o["statuses"].items())),
        "",
        f"Insufficient-context rate: {fmt_value(o['insufficient_rate'])} · error rate: "
        f"{fmt_value(o['error_rate'])}",
        "",
        *_error_lines(run),
        "Answer or decline, against whether the run retrieved all gold sections "
        f"({d['runs']} runs):",
        "",
        md_table(
            ["decision", "all gold retrieved", "gold missing"],
            [
                [
                    "answered",
                    d["counts"]["answered/gold_retrieved"],
                    d["counts"]["answered/gold_missing"],
                ],
                [
                    "insufficient context",
                    d["counts"]["insufficient/gold_retrieved"],
                    d["counts"]["insufficient/gold_missing"],
                ],
            ],
        ),
        "",
        f"Answered with all gold retrieved: {fmt_value(d['answered_with_gold'])} · declined with "
        f"gold missing: {fmt_value(d['insufficient_without_gold'])}",
        "",
    ]
    if run.calibration.runs:
        out += [
            "## CRAG verdict calibration (guided)",
            "",
            md_table(list(CRAG_TABLE_HEADERS), run.calibration.table_rows()),
            "",
            run.calibration.note(),
            "",
        ]
    if "calibration.png" in names:
        out += ["![calibration](calibration.png)", ""]
    ag = s["agent"]
    lat = s["latency_s"]
    t = s["tokens"]
    out += [
        "## Agent behaviour (means per run)",
        "",
        md_table(list(ag), [list(ag.values())]),
        "",
        "Repeated calls: tool calls with the same tool and arguments as an earlier call of the "
        "run. Refinements: guided query-refinement rounds; replans and revisions: ReAct "
        "re-planning and self-reflection rounds.",
        "",
        "## Latency",
        "",
        md_table(
            ["p50 (s)", "p95 (s)", "mean (s)", "max (s)"],
            [[lat["p50"], lat["p95"], lat["mean"], lat["max"]]],
        ),
        "",
    ]
    if "latency.png" in names:
        out += ["![latency](latency.png)", ""]
    out += ["## Tokens and cost", ""]
    if t["reported"]:
        out += [
            md_table(
                ["", *t["total"]],
                [["total", *t["total"].values()], ["mean per run", *t["mean_per_run"].values()]],
            ),
            "",
            f"Cost: {fmt_value(t['cost_usd'])} USD"
            + ("" if t["cost_usd"] is not None else " (give --price-in / --price-out)"),
            "",
        ]
    else:
        out += ["The reasoner reported no token usage (the heuristic reasoner uses no model).", ""]
    if s["by_type"]:
        keys = list(next(iter(s["by_type"].values())))
        out += [
            "## By question type",
            "",
            md_table(["type", *keys], [[k, *v.values()] for k, v in s["by_type"].items()]),
            "",
        ]
    misses = [r for r in run.records if r["all_gold_retrieved"] is False]
    if misses:
        out += [
            f"## Not all gold retrieved ({len(misses)} questions; first {MAX_MISSES_SHOWN})",
            "",
            md_table(
                ["id", "question", "gold", "retrieved (first 5)", "status"],
                [
                    [
                        r["id"],
                        r["question"][:120],
                        ", ".join(r["gold_source_ids"]),
                        ", ".join(r["retrieved"][:5]),
                        r["status"],
                    ]
                    for r in misses[:MAX_MISSES_SHOWN]
                ],
            ),
            "",
        ]
    return "\n".join(out)


def _error_lines(run: EvalRun) -> list[str]:
    errors = [r for r in run.records if r["status"] == "error"]
    if not errors:
        return []
    return [
        f"Runs that ended in status error ({len(errors)}; first {MAX_MISSES_SHOWN}):",
        "",
        md_table(["id", "error"], [[r["id"], _cut(r["error"] or "", 300)] for r in errors[:10]]),
        "",
    ]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ingest_line(ingest: dict[str, Any]) -> str:
    if not ingest:
        return "none (existing collection)"
    parts = [
        f"{ingest.get(k, 0)} {k}"
        for k in ("added", "replaced", "unchanged", "duplicate", "skipped", "failed")
        if ingest.get(k) or k in ("added", "unchanged")
    ]
    line = (
        f"{', '.join(parts)}; {ingest.get('chunks_embedded', 0)} chunks embedded in "
        f"{ingest.get('seconds')} s"
    )
    for failure in ingest.get("failures") or []:
        line += f"; failed: {failure}"
    removed = ingest.get("removed_documents") or []
    if removed:
        line += f"; removed {len(removed)} documents no longer in the corpus"
    return line


def load_summary(path: Path) -> dict[str, Any]:
    """The ``summary.json`` of a results folder (or the file itself).

    Raises:
        UserError: no summary there, or it is not a summary written by ``sleuth eval``.
    """
    path = Path(path)
    file = path / SUMMARY if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"no {SUMMARY} in {path}: give a folder written by 'sleuth eval'")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{file}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or "retrieval" not in data or "questions" not in data:
        raise UserError(f"{file}: not a summary written by 'sleuth eval'")
    return data


def _get(summary: dict[str, Any], path: Sequence[str]) -> float | None:
    value: Any = summary
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per compared metric present in either summary: ``{"metric", "a", "b",
    "delta" (b - a), "better"}`` where ``better`` is ``"a"``, ``"b"``, ``"="`` or ``None``
    (no preferred direction, or a side is missing)."""
    rows = []
    for label, path, higher in COMPARED:
        va, vb = _get(a, path), _get(b, path)
        if va is None and vb is None:
            continue
        delta = vb - va if va is not None and vb is not None else None
        better = None
        if delta is not None and higher is not None:
            better = "=" if abs(delta) < 1e-12 else ("b" if (delta > 0) == higher else "a")
        rows.append({"metric": label, "a": va, "b": vb, "delta": delta, "better": better})
    return rows


def describe(summary: dict[str, Any]) -> str:
    """One line naming a run: dataset, mode, reasoner, questions, start time."""
    return (
        f"{summary.get('dataset')} · {summary.get('mode')} · {summary.get('reasoner')} · "
        f"{summary.get('questions')} questions · {summary.get('started_at')}"
    )


def comparability_warnings(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between the two runs besides the system under test."""
    warnings = []
    if a.get("dataset") != b.get("dataset"):
        warnings.append(f"different datasets: {a.get('dataset')} vs {b.get('dataset')}")
    if a.get("questions") != b.get("questions"):
        warnings.append(
            f"different numbers of questions: {a.get('questions')} vs {b.get('questions')}"
        )
    sa, sb = a.get("settings") or {}, b.get("settings") or {}
    for key in sorted(set(sa) | set(sb)):
        if key != "workers" and sa.get(key) != sb.get(key):
            warnings.append(f"different {key}: {sa.get(key)} vs {sb.get(key)}")
    loads = [(s.get("machine_at_start") or {}).get("load_average") or [None] for s in (a, b)]
    if all(load[0] is not None for load in loads) and abs(loads[0][0] - loads[1][0]) > 1.0:
        warnings.append(
            f"the machine was busier in one run (load average {loads[0][0]} vs "
            f"{loads[1][0]} at the start): compare latencies with care"
        )
    return warnings


def changed_questions(a_dir: Path, b_dir: Path) -> list[dict[str, Any]]:
    """Questions (by id, in both runs) whose outcome changed from A to B: all gold retrieved
    gained or lost, status changed, or the gold cited in one run only.

    Returns:
        ``[{"id", "question", "change", "a", "b"}]``; empty when a side has no
        ``results.jsonl`` (a bare summary.json was given).
    """
    records = []
    for folder in (a_dir, b_dir):
        path = (folder if folder.is_dir() else folder.parent) / RESULTS
        if not path.is_file():
            return []
        records.append({r["id"]: r for r in map(json.loads, path.read_text().splitlines())})
    out = []
    for qid, ra in records[0].items():
        rb = records[1].get(qid)
        if rb is None:
            continue
        for key, label in (
            ("all_gold_retrieved", "all gold retrieved"),
            ("status", "status"),
            ("citation_recall", "citation recall"),
        ):
            if ra.get(key) != rb.get(key):
                out.append(
                    {
                        "id": qid,
                        "question": _cut(ra["question"], 80),
                        "change": label,
                        "a": ra.get(key),
                        "b": rb.get(key),
                    }
                )
    return out
