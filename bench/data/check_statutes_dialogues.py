"""Validate ``bench/data/statutes_dialogues.jsonl`` against the statutes it cites.

Each line is one multi-turn dialogue ``{"id": "sd-NNN", "turns": [...]}`` whose turns each hold a
``question``, ``gold_source_ids`` and ``key_facts``. Checks: every line is valid JSON with exactly
those keys; ids are unique and match ``sd-NNN``; a dialogue has 2-3 turns; every turn has a
non-empty question, 1-3 gold ids that are sections of BNS / BNSS / BSA (``ABBR_S<number>``) and
1-3 key facts, each a non-empty list of alternative phrasings of which EVERY one occurs in the
normalized text (lowercased, whitespace collapsed) of one of the turn's gold sections; every
non-first turn reads as a follow-up (at most 12 words, or a pronoun / ellipsis marker); and the
file holds at least 40 dialogues. Prints counts (dialogues, turns, turns per act, follow-ups whose
gold differs from turn 1's); exits 1 on errors, 2 when an input file is missing.

Run from the repository root: ``python bench/data/check_statutes_dialogues.py``.
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
DATA_FILE = "statutes_dialogues.jsonl"
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3] / "shared/data/statutes"
ID_RE = re.compile(r"sd-\d{3}")
MIN_DIALOGUES = 40
MAX_PLAIN_FOLLOW_UP_WORDS = 12
FOLLOW_UP_MARKER = re.compile(
    r"\b(it|its|they|them|their|he|him|she|his|her|that|this|those|same|and"
    r"|what about|how about)\b",
    re.IGNORECASE,
)


def norm(text: str) -> str:
    """Lowercase and collapse every run of whitespace (line breaks included) to one space."""
    return " ".join(text.lower().split())


def load_sections(data_dir: Path) -> dict[str, str]:
    """Map ``ABBR_S<number>`` to the normalized text of that section."""
    sections: dict[str, str] = {}
    for abbr, name in ACTS.items():
        data = json.loads((data_dir / name).read_text(encoding="utf-8"))
        for sec in data["sections"]:
            sections[f"{abbr}_S{sec['section_number']}"] = norm(sec["text"])
    return sections


def is_str_list(value: Any) -> bool:
    """True for a non-empty list of non-empty strings."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and v.strip() for v in value)
    )


def check_turn(turn: Any, first: bool, sections: dict[str, str]) -> list[str]:
    """Return the problems of one turn (empty when it is valid)."""
    if not isinstance(turn, dict) or set(turn) != {"question", "gold_source_ids", "key_facts"}:
        return ["turn must have exactly the keys question, gold_source_ids, key_facts"]
    question, gold, facts = turn["question"], turn["gold_source_ids"], turn["key_facts"]
    if not isinstance(question, str) or not question.strip():
        return ["empty question"]
    if not is_str_list(gold) or len(gold) > 3:
        return ["gold_source_ids must be a list of 1-3 strings"]
    if not isinstance(facts, list) or not 1 <= len(facts) <= 3 or not all(map(is_str_list, facts)):
        return ["key_facts must be a list of 1-3 non-empty lists of strings"]
    unknown = [g for g in gold if g not in sections]
    if unknown:
        return [f"unknown gold ids {unknown}"]
    errors = [
        f"key-fact phrasing {alt!r} not found in {gold}"
        for fact in facts
        for alt in fact
        if not any(norm(alt) in sections[g] for g in gold)
    ]
    words = len(question.split())
    if not first and words > MAX_PLAIN_FOLLOW_UP_WORDS and not FOLLOW_UP_MARKER.search(question):
        errors.append(f"follow-up has {words} words and no pronoun / ellipsis marker")
    return errors


def check_dialogue(item: Any, sections: dict[str, str]) -> list[str]:
    """Return the problems of one dialogue, each prefixed with its turn number where relevant."""
    if not isinstance(item, dict) or set(item) != {"id", "turns"}:
        return ["line must be an object with exactly the keys id, turns"]
    errors: list[str] = []
    if not isinstance(item["id"], str) or not ID_RE.fullmatch(item["id"]):
        errors.append(f"id {item['id']!r} does not match sd-NNN")
    turns = item["turns"]
    if not isinstance(turns, list) or not 2 <= len(turns) <= 3:
        return [*errors, "needs 2-3 turns"]
    for n, turn in enumerate(turns, 1):
        errors += [f"turn {n}: {e}" for e in check_turn(turn, n == 1, sections)]
    return errors


def act_of(source_id: str) -> str:
    """The act prefix of a source id (``BNSS_S35`` -> ``BNSS``)."""
    return source_id.split("_")[0]


def main() -> int:
    """Validate the file, print the counts, return the exit status."""
    parser = argparse.ArgumentParser(description="Validate statutes_dialogues.jsonl.")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--file", type=Path, default=Path(__file__).with_name(DATA_FILE))
    args = parser.parse_args()
    inputs = [args.file, *(args.data_dir / name for name in ACTS.values())]
    missing = [path for path in inputs if not path.is_file()]
    if missing:
        print("ERROR missing input file(s):", ", ".join(map(str, missing)))
        return 2
    sections = load_sections(args.data_dir)
    errors: list[str] = []
    items: list[dict[str, Any]] = []
    for lineno, line in enumerate(args.file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {lineno}: invalid JSON ({exc})")
            continue
        label = item.get("id", f"line {lineno}") if isinstance(item, dict) else f"line {lineno}"
        errors += [f"{label}: {e}" for e in check_dialogue(item, sections)]
        if isinstance(item, dict):
            items.append(item)
    ids = Counter(str(it.get("id")) for it in items)
    errors += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    if len(items) < MIN_DIALOGUES:
        errors.append(f"only {len(items)} dialogues, need at least {MIN_DIALOGUES}")
    turns = [t for it in items if isinstance(it.get("turns"), list) for t in it["turns"]]
    golds = [t.get("gold_source_ids") or [] for t in turns if isinstance(t, dict)]
    acts = Counter(a for g in golds for a in sorted({act_of(str(s)) for s in g}))
    follow_ups = shifted = 0
    for it in items:
        dialogue = [t for t in it.get("turns") or [] if isinstance(t, dict)]
        first = set(dialogue[0].get("gold_source_ids") or []) if dialogue else set()
        for turn in dialogue[1:]:
            follow_ups += 1
            shifted += set(turn.get("gold_source_ids") or []) != first
    print(f"dialogues: {len(items)}, turns: {len(turns)}")
    shares = {a: f"{n} ({n / max(len(turns), 1):.0%})" for a, n in sorted(acts.items())}
    print("turns per act:", shares)
    print(f"follow-ups with a gold different from turn 1: {shifted}/{follow_ups}")
    for e in errors:
        print("ERROR", e)
    print("OK" if not errors else f"{len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
