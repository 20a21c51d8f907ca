"""Tests are written on questions made up for them, never on a benchmark set's questions.

A test that pins a rule's output on a dataset question defends the fit of the rule to that
question, not the behaviour (issue 26). This scans every string literal of ``tests/`` for a
question of the handed sets (HotpotQA, MuSiQue, the synthetic statute questions, the judged
statute sets), compared with case, spacing and punctuation ignored. The loader tests of
``test_eval_datasets.py`` read the real files on purpose (they check the loader maps them)
and are exempt.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from sleuth.eval.datasets import load_dataset

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
EXEMPT = {"test_eval_datasets.py"}


def _key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _dataset_questions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in ("hotpotqa", "musique", "statutes"):
        for q in load_dataset(name, SHARED).questions:
            found[_key(q.question)] = name
    for path in sorted((REPO / "bench" / "data").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)  # a question, or a dialogue of turns
            for turn in item.get("turns", [item]):
                found[_key(turn["question"])] = path.name
    return found


@pytest.mark.skipif(not (SHARED / "hotpotqa").is_dir(), reason="../shared/data not present")
def test_no_test_is_written_on_a_benchmark_question() -> None:
    questions = _dataset_questions()
    offending = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name in EXEMPT:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                source = questions.get(_key(node.value))
                if source and len(node.value.split()) >= 4:
                    offending.append(f"{path.name}:{node.lineno} ({source}): {node.value[:60]}")
    assert offending == []
