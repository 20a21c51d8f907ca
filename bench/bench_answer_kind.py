"""Yes/no questions read from their form: :func:`sleuth.agents.reader.answer_kind` against labels.

The answer kind decides the reader's prompt, its output budget and whether a verdict is
checked against the cited rule (:mod:`sleuth.agents.finish`), so a yes/no question read as a
fact question skips the verdict checks. Labels, per question:

- statute questions with a gold verdict (``bench/data/statutes_judged.jsonl``, the held-out
  ``statutes_yes_no.jsonl``): yes/no; the judged set's other in-corpus questions that do not
  open with an auxiliary verb: not yes/no (those that do, but carry no verdict because their
  answer is a condition, are left out);
- HotpotQA (``../shared/data/hotpotqa``) and MuSiQue dev (``../shared/data/musique``): yes/no
  when the gold answer is "yes" or "no".

Printed per split (:func:`sleuth.eval.datasets.split_of`) and source: true/false positives and
negatives of ``answer_kind(question) == "yes_no"``, and the questions it gets wrong.

Then the form the generator asks in (:data:`sleuth.agents.generation.SHORT_FORM_KINDS`): a
short answer (``fact``, ``yes_no``) or sentences (``explanation``, ``list``, ``procedure``),
against the judged set's ``answer_type`` labels (its in-corpus questions) and, as short, every
HotpotQA and MuSiQue question (their gold answers are names, dates, numbers, yes/no): per
source, the questions, those labelled long, how many of each are read in their form, and the
share read in the right form. No model, no index; under a second.

    python bench/bench_answer_kind.py [--split dev|test|all]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, REPO, commit, print_header
from sleuth.agents.generation import SHORT_FORM_KINDS
from sleuth.agents.reader import answer_kind
from sleuth.eval.datasets import split_of

STATUTE_SETS = (
    REPO / "bench" / "data" / "statutes_judged.jsonl",
    REPO / "bench" / "data" / "statutes_yes_no.jsonl",
)
LONG_KINDS = ("explanation", "list", "procedure")
OPENS_WITH_VERB = ("can", "is", "does", "do", "will", "may", "must", "are", "should", "has")


def labelled() -> Iterator[tuple[str, str, str, bool]]:
    """``(source, id, question, is_yes_no)`` for every labelled question (module docstring)."""
    for path in STATUTE_SETS:
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            if item.get("kind") == "out_of_scope":
                continue
            yes_no = bool(item.get("verdict"))
            if not yes_no and item["question"].split()[0].lower() in OPENS_WITH_VERB:
                continue  # yes/no in form, answered with a condition: no label
            yield "statutes", item["id"], item["question"], yes_no
    for source, qid, question, answer in multihop():
        yield source, qid, question, answer.strip().lower() in ("yes", "no")


def multihop() -> Iterator[tuple[str, str, str, str]]:
    """``(source, id, question, gold answer)`` of every HotpotQA and MuSiQue question."""
    for path, key in (
        (DATA / "hotpotqa" / "hotpotqa_train.json", "_id"),
        (DATA / "musique" / "musique_dev.json", "id"),
    ):
        for item in json.loads(path.read_text(encoding="utf-8")):
            yield path.parent.name, item[key], item["question"], str(item["answer"])


def form_labelled() -> Iterator[tuple[str, str, str, bool]]:
    """``(source, id, question, wants_long_form)``: the judged set's in-corpus questions by
    their ``answer_type``, every HotpotQA and MuSiQue question as short (module docstring)."""
    for line in STATUTE_SETS[0].read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item.get("kind") != "out_of_scope" and item.get("answer_type"):
            yield "statutes", item["id"], item["question"], item["answer_type"] in LONG_KINDS
    for source, qid, question, _ in multihop():
        yield source, qid, question, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    args = parser.parse_args()
    print_header("bench_answer_kind", [("split", args.split), ("commit", commit())])
    counts: dict[str, list[int]] = {}
    wrong: list[str] = []
    for source, qid, question, yes_no in labelled():
        if args.split != "all" and split_of(qid) != args.split:
            continue
        read = answer_kind(question) == "yes_no"
        row = counts.setdefault(source, [0, 0, 0, 0])
        row[(0 if read else 1) if yes_no else (2 if read else 3)] += 1
        if read != yes_no:
            wrong.append(f"{'FN' if yes_no else 'FP'} {source} {qid}: {question}")
    print(f"{'source':<9} {'yes/no':>6} {'found':>5} {'missed':>6} {'other':>5} {'misread':>7}")
    for source, (tp, fn, fp, tn) in counts.items():
        print(f"{source:<9} {tp + fn:>6} {tp:>5} {fn:>6} {fp + tn:>5} {fp:>7}")
    for line in wrong:
        print(line)
    print()
    forms: dict[str, list[int]] = {}
    misformed: list[str] = []
    for source, qid, question, long_form in form_labelled():
        if args.split != "all" and split_of(qid) != args.split:
            continue
        read_long = answer_kind(question) not in SHORT_FORM_KINDS
        row = forms.setdefault(source, [0, 0, 0, 0])  # short right, short n, long right, long n
        at = 2 if long_form else 0
        row[at] += read_long == long_form
        row[at + 1] += 1
        if read_long != long_form:
            misformed.append(
                f"{'long' if long_form else 'short'} read as {answer_kind(question)}: "
                f"{source} {qid}: {question}"
            )
    print(f"{'source':<9} {'short':>5} {'read':>5} {'long':>5} {'read':>5} {'agreement':>9}")
    for source, (s_ok, s_n, l_ok, l_n) in forms.items():
        share = (s_ok + l_ok) / max(1, s_n + l_n)
        print(f"{source:<9} {s_n:>5} {s_ok:>5} {l_n:>5} {l_ok:>5} {share:>9.2f}")
    for line in misformed:
        print(line)


if __name__ == "__main__":
    main()
