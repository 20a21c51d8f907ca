"""Validate ``bench/data/statutes_judged.jsonl`` against the statutes it cites.

Checks the schema of every line, unique ids, unique gold section sets, that every gold id is a
section of BNS / BNSS / BSA, that every key fact has an alternative present in a gold section's
normalized text (lowercased, whitespace collapsed), and that no question names its gold section
by title or as "section N". Prints counts per act, answer type and verdict; exits 1 on errors.

Run from the repository root: ``python3 bench/data/check_statutes_judged.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ACTS = {
    "BNS": "the_bharatiya_nyaya_sanhita_2023.json",
    "BNSS": "the_bharatiya_nagarik_suraksha_sanhita_2023.json",
    "BSA": "the_bharatiya_sakshya_adhiniyam_2023.json",
}
KEYS = {"id", "question", "gold_source_ids", "key_facts", "verdict", "answer_type", "kind"}
DATA_FILE = "statutes_judged.jsonl"
ANSWER_TYPES = {"fact", "yes_no", "explanation", "list", "procedure"}
SECTION_REF = re.compile(r"\bsections?\s*\d+", re.IGNORECASE)


def norm(text: str) -> str:
    """Lowercase and collapse every run of whitespace (line breaks included) to one space."""
    return " ".join(text.lower().split())


def load_sections(root: Path) -> dict[str, tuple[str, str]]:
    """Map ``ABBR_S<number>`` to (normalized title without trailing periods, normalized text)."""
    sections: dict[str, tuple[str, str]] = {}
    for abbr, name in ACTS.items():
        data = json.loads((root / "statutes" / name).read_text(encoding="utf-8"))
        for sec in data["sections"]:
            title = norm(sec["title"]).strip(" .")
            sections[f"{abbr}_S{sec['section_number']}"] = (title, norm(sec["text"]))
    return sections


def check_item(item: dict[str, Any], sections: dict[str, tuple[str, str]]) -> list[str]:
    """Return the problems of one line (empty when it is valid)."""
    if set(item) != KEYS:
        return [f"keys {sorted(item)} != {sorted(KEYS)}"]
    errors: list[str] = []
    question, gold, facts = item["question"], item["gold_source_ids"], item["key_facts"]
    if not isinstance(question, str) or not question.strip():
        return ["empty question"]
    if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
        return ["gold_source_ids must be a list of strings"]
    if not isinstance(facts, list) or not all(
        isinstance(f, list) and f and all(isinstance(a, str) for a in f) for f in facts
    ):
        return ["key_facts must be a list of non-empty lists of strings"]
    if item["answer_type"] not in ANSWER_TYPES:
        errors.append(f"bad answer_type {item['answer_type']!r}")
    judged = item["kind"] == "in_corpus" and item["answer_type"] == "yes_no"
    if item["verdict"] not in (("yes", "no") if judged else (None,)):
        errors.append(f"verdict {item['verdict']!r} does not fit kind and answer_type")
    if item["kind"] == "out_of_scope":
        if gold or facts:
            errors.append("out_of_scope line has gold ids or key facts")
        return errors
    if item["kind"] != "in_corpus":
        return [*errors, f"bad kind {item['kind']!r}"]
    if not 1 <= len(gold) <= 3 or not 1 <= len(facts) <= 3:
        errors.append("needs 1-3 gold ids and 1-3 key facts")
    unknown = [g for g in gold if g not in sections]
    if unknown:
        return [*errors, f"unknown gold ids {unknown}"]
    texts = [sections[g][1] for g in gold]
    for fact in facts:
        for alt in fact:
            if alt != norm(alt) or not 1 <= len(alt.split()) <= 5:
                errors.append(f"alternative {alt!r} must be lowercase, 1-5 words")
        if not any(alt in text for alt in fact for text in texts):
            errors.append(f"key fact {fact} not found in {gold}")
    q = norm(question)
    errors += [f"question contains title of {g}" for g in gold if sections[g][0] in q]
    if SECTION_REF.search(question):
        errors.append("question names a section number")
    return errors


def main() -> int:
    """Validate the file, print the counts, return the exit status."""
    parser = argparse.ArgumentParser(description="Validate statutes_judged.jsonl.")
    parser.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    parser.add_argument("--file", type=Path, default=Path(__file__).with_name(DATA_FILE))
    args = parser.parse_args()
    sections = load_sections(args.data_root)
    lines = args.file.read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    errors: list[str] = []
    ids = Counter(str(it.get("id")) for it in items)
    errors += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    inside = [it for it in items if it.get("kind") == "in_corpus"]
    outside = [it for it in items if it.get("kind") != "in_corpus"]
    golds = Counter(tuple(sorted(it.get("gold_source_ids") or ())) for it in inside)
    errors += [f"gold set {g} used {n} times" for g, n in golds.items() if n > 1]
    for it in items:
        errors += [f"{it.get('id')}: {e}" for e in check_item(it, sections)]
    acts = Counter(
        "+".join(sorted({str(g).split("_")[0] for g in it.get("gold_source_ids") or ()}))
        for it in inside
    )
    print(f"lines: {len(items)} (in_corpus {len(inside)}, out_of_scope {len(outside)})")
    print("per act:", dict(sorted(acts.items())))
    print("per answer_type (in_corpus):", dict(Counter(it.get("answer_type") for it in inside)))
    print("per answer_type (out_of_scope):", dict(Counter(it.get("answer_type") for it in outside)))
    print("verdicts:", dict(Counter(it.get("verdict") for it in inside if it.get("verdict"))))
    for e in errors:
        print("ERROR", e)
    print("OK" if not errors else f"{len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
