"""Shared helpers for the benchmark scripts: data paths, machine facts, tables, percentiles.

The data is read in place from ``../shared/data`` (relative to the repository root); it is
never copied into the project.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
STATUTES = DATA / "statutes"
RESULTS = REPO / "bench" / "results"

ACTS_3 = (
    "the_bharatiya_nyaya_sanhita_2023.json",
    "the_bharatiya_nagarik_suraksha_sanhita_2023.json",
    "the_bharatiya_sakshya_adhiniyam_2023.json",
)
ACTS_4 = (*ACTS_3, "the_consumer_protection_act_2019.json")
COLLECTION = "statutes"

# Reference numbers printed by ../shared/tools/baseline_bm25.py (single-shot bm25s, one
# document per section, no stemming), from ../shared/data/README.md.
BASELINE_BM25_STATUTES = {1: 0.626, 5: 0.782, 10: 0.814}


def run_shared_baseline(function: str) -> str | None:
    """Stdout of ``function()`` of ``../shared/tools/baseline_bm25.py``, run in this process
    (``None``, with a note printed, when it cannot run: e.g. ``bm25s`` missing)."""
    import contextlib
    import importlib.util
    import io

    path = DATA.parent / "tools" / "baseline_bm25.py"
    spec = importlib.util.spec_from_file_location("baseline_bm25", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    buffer = io.StringIO()
    try:
        spec.loader.exec_module(module)
        with contextlib.redirect_stdout(buffer):
            getattr(module, function)()
    except Exception as exc:  # the reference numbers are still printed
        print(f"(baseline_bm25.py could not run here: {type(exc).__name__}: {exc})")
        return None
    return buffer.getvalue()


def statute_paths(names: Sequence[str] = ACTS_4) -> list[Path]:
    """Absolute paths of statute files in the shared data folder (checked to exist)."""
    paths = [STATUTES / n for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        sys.exit(f"missing data files: {', '.join(missing)} (expected under {STATUTES})")
    return paths


@dataclass(frozen=True)
class Question:
    """One synthetic_qa.json question with its gold citation id (e.g. ``BNS_S103``)."""

    index: int
    text: str
    gold: str
    act: str
    section: str


def load_questions() -> list[Question]:
    """The 996 questions of synthetic_qa.json; gold = abbreviate(source_act) + '_S' + section."""
    from sleuth.ingest.records import abbreviate

    raw = json.loads((STATUTES / "synthetic_qa.json").read_text(encoding="utf-8"))
    return [
        Question(
            index=i,
            text=q["instruction"],
            gold=f"{abbreviate(q['source_act'])}_S{q['source_section']}",
            act=abbreviate(q["source_act"]),
            section=str(q["source_section"]),
        )
        for i, q in enumerate(raw)
    ]


def bench_settings(data_dir: Path) -> Any:
    """Settings for a benchmark: this data dir, local index, SQLite, heuristic reasoner.

    Pinned explicitly so that ``SLEUTH_*`` variables of the caller's shell cannot change
    what is measured (the embedding model and chunk sizes stay at their defaults).
    """
    from sleuth.config import Settings

    return Settings(
        data_dir=data_dir,
        database_url=None,
        index_backend="local",
        llm="heuristic",
    )


def write_records(folder: str | Path, name: str, records: Sequence[dict[str, Any]]) -> Path:
    """``records`` as JSON lines to ``folder/name`` (the folder created); the path."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def split_parser(doc: str, default_split: str) -> argparse.ArgumentParser:
    """The arguments every per-split statute bench takes: ``--split`` (dev, test or all; a
    hash of each question id), ``--data-dir`` (keep the index there) and ``--out`` (the
    folder of the JSONL records, ``bench/results``). ``doc``'s first paragraph describes it."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default=default_split)
    parser.add_argument("--data-dir", help="keep the index here (default: a temp dir)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    return parser


@contextmanager
def data_dir(given: str | None, prefix: str) -> Iterator[Path]:
    """``given`` (created if missing, kept afterwards) or a fresh temporary directory."""
    if given:
        path = Path(given).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


def load_average() -> str:
    """The 1/5/15-minute load averages, e.g. ``'1.92 2.10 2.30'``."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on POSIX
        return "n/a"


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    return out.stdout.strip() or "n/a"


def commit() -> str:
    """The repository's HEAD commit, with ``+dirty`` when the tree has changes."""
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head + ("+dirty" if dirty else "")


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "n/a"


def machine_facts() -> list[tuple[str, str]]:
    """Facts printed with every result: date, cores, load, versions, commit."""
    import torch

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        usable = os.cpu_count() or 0
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "src")
    return [
        ("date", _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")),
        ("host", f"{platform.node()} ({platform.system()} {platform.release()})"),
        ("cpu", _cpu_model()),
        ("cores", f"{os.cpu_count()} logical, {usable} usable by this process"),
        ("load average (1/5/15 min)", load_average()),
        ("python", platform.python_version()),
        ("torch", f"{torch.__version__} ({torch.get_num_threads()} intra-op threads)"),
        ("sentence-transformers", _version("sentence-transformers")),
        ("numpy / bm25s", f"{_version('numpy')} / {_version('bm25s')}"),
        (
            "sleuth commit",
            f"{_git('rev-parse', '--short', 'HEAD')}"
            + (" + uncommitted changes in src/" if dirty not in ("", "n/a") else ""),
        ),
    ]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "n/a"


def print_header(title: str, extra: Sequence[tuple[str, str]] = ()) -> None:
    """A title line, then the machine facts and any extra facts, aligned."""
    print(title)
    print("=" * len(title))
    facts = [*machine_facts(), *extra]
    width = max(len(k) for k, _ in facts)
    for key, value in facts:
        print(f"{key:<{width}} : {value}")
    print()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> str:
    """A plain-text table; numbers right-aligned, text left-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    numeric = [
        bool(rows) and all(isinstance(r[i], int | float) for r in rows) for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out = [title] if title else []
    out.append(line(list(headers)))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def percentile(values: Sequence[float], p: float) -> float:
    """:func:`sleuth.eval.metrics.percentile`, with NaN for no values (for tables)."""
    from sleuth.eval.metrics import percentile as eval_percentile

    value = eval_percentile(values, p)
    return float("nan") if value is None else value


def verdict(value: float, target: float, higher_is_better: bool) -> str:
    """'MET' or 'MISSED by …' for a target line."""
    ok = value >= target if higher_is_better else value <= target
    if ok:
        return "MET"
    gap = abs(value - target)
    rel = gap / target * 100 if target else float("inf")
    return f"MISSED by {gap:.3g} ({rel:.0f}%)"


def private_copy(source: Path, target: Path) -> None:
    """Copy a statutes data dir's index files and a consistent snapshot of its SQLite
    catalog into ``target``, without the stored runs (a benchmark's runs must not grow the
    shared catalog)."""
    import shutil
    import sqlite3

    shutil.copytree(source / "indexes" / COLLECTION, target / "indexes" / COLLECTION)
    with (
        sqlite3.connect(source / "catalog.sqlite3") as src,
        sqlite3.connect(target / "catalog.sqlite3") as dst,
    ):
        src.backup(dst)
        dst.execute("DELETE FROM runs")
        dst.commit()
