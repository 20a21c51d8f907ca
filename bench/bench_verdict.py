"""The yes/no verdict reader: does the verdict read off the evidence agree with the law?

For every yes/no question of the judged statute set (``bench/data/statutes_judged.jsonl``)
and of the held-out yes/no set (``bench/data/statutes_yes_no.jsonl``, written after the
reader was built, never used to choose anything), the BNS, BNSS and BSA are searched
(``search_sections``, hybrid, reranked, k = 10) and
:func:`sleuth.agents.verdict.rule_verdict` reads the verdict twice:

- ``gold``: the gold sections alone — the reading alone, retrieval aside;
- ``ranked``: the first :data:`~sleuth.agents.finish.RULE_SECTIONS` retrieved sections —
  what a run gets when the answer cites none of them.

Each is read two ways in the same run: ``sentence`` (negation parity over the whole rule
sentence, every "not" a cue: the reader before clause focus) and ``clause`` (the current
reader: the clause the cross-encoder finds most relevant, bounds such as "not less than" not
counted). Reported per set and split: how often a verdict is given, and how often a given
verdict agrees with the gold one. Records go to ``bench/results/verdict-<split>.jsonl``.
No LLM by default; run it alone (2 cores), ~2 min with a kept index.

With ``--llm local`` the model's reading is added (``model``:
:func:`sleuth.agents.verdict.judged_verdict` on the first section of each order, one forward
pass each): its log-odds of Yes over No, read as Yes at or above
:data:`~sleuth.agents.verdict.JUDGED_YES_LOG_ODDS`, No at or below
:data:`~sleuth.agents.verdict.JUDGED_NO_LOG_ODDS`, no verdict between — the bands within
which a run's answer keeps its own verdict. ~3 min more.

    python bench/bench_verdict.py --split all --data-dir /tmp/sleuth-bench [--llm local]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ACTS_3, REPO, data_dir, print_header, split_parser, statute_paths, write_records
from results_tables import verdict_table

SETS = {
    "judged": REPO / "bench" / "data" / "statutes_judged.jsonl",
    "held-out yes/no": REPO / "bench" / "data" / "statutes_yes_no.jsonl",
}
COLLECTION = "verdict_bench"


def sentence_parity(question: str, sentence: str) -> str:
    """The verdict of the earlier reader: negation parity over the whole sentence."""

    from sleuth.agents.negation import _NEGATION

    def odd(text: str) -> bool:  # every cue counts, bounds ("not less than") too
        return len(_NEGATION.findall(text)) % 2 == 1

    return "no" if odd(sentence) != odd(question) else "yes"


def questions(split: str) -> list[dict[str, Any]]:
    """The yes/no questions of both sets in ``split`` (a missing set file is skipped)."""
    from sleuth.eval.datasets import split_of

    out = []
    for name, path in SETS.items():
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            if item.get("verdict") in ("yes", "no") and (
                split == "all" or split_of(item["id"]) == split
            ):
                out.append({**item, "set": name, "split": split_of(item["id"])})
    return out


def main() -> None:
    parser = split_parser(__doc__, "all")
    parser.add_argument("--llm", help="also read the verdict with this model (e.g. local)")
    args = parser.parse_args()

    from sleuth.agents.finish import RULE_SECTIONS
    from sleuth.agents.support import CROSS_ENCODER_THRESHOLD
    from sleuth.agents.verdict import (
        JUDGED_NO_LOG_ODDS,
        JUDGED_YES_LOG_ODDS,
        judged_verdict,
        rule_verdict,
    )
    from sleuth.app import Sleuth
    from sleuth.config import Settings
    from sleuth.llm import testing
    from sleuth.llm.factory import make_chat_model
    from sleuth.tools.base import RunContext

    print_header("bench_verdict", [("split", args.split)])
    items = questions(args.split)
    records = []
    with data_dir(args.data_dir, "sleuth-verdict-") as ddir:
        app = Sleuth(Settings(data_dir=ddir, rerank="on", llm="heuristic"))
        app.pipeline.ingest(statute_paths(ACTS_3), COLLECTION)
        scorer = app.kb.cross_encoder
        assert scorer is not None
        model = None
        if args.llm:
            testing.ALLOW_MODEL_REQUESTS = True
            model = make_chat_model(Settings(data_dir=ddir, llm=args.llm))
        for item in items:
            hits = app.kb.search_sections(COLLECTION, item["question"], k=10)
            ranked = [h.chunk.source_id for h in hits]
            row: dict[str, Any] = {
                k: item[k] for k in ("id", "set", "split", "verdict", "gold_source_ids")
            }
            row["gold_retrieved"] = any(g in ranked for g in item["gold_source_ids"])
            for order_name, order in (
                ("gold", list(item["gold_source_ids"])),
                ("ranked", ranked[:RULE_SECTIONS]),
            ):
                sections = {sid: app.kb.section(COLLECTION, sid) for sid in dict.fromkeys(order)}
                rule = rule_verdict(
                    item["question"], sections, order, scorer, CROSS_ENCODER_THRESHOLD
                )
                row[order_name] = (
                    None
                    if rule is None
                    else {
                        "clause": rule.verdict,
                        "sentence": sentence_parity(item["question"], rule.sentence),
                        "source_id": rule.source_id,
                        "score": round(rule.score, 3),
                        "rule": rule.sentence[:200],
                        "read": rule.clause[:200],
                    }
                )
            if model is not None:
                row["model"] = {}
                for order_name, order in (("gold", item["gold_source_ids"]), ("ranked", ranked)):
                    ctx = RunContext(collection=COLLECTION)
                    sid = order[0]
                    ctx.retrieved[sid] = app.kb.section(COLLECTION, sid)
                    value = judged_verdict(item["question"], sid, ctx, model, scorer)
                    verdict = None
                    if value is not None and value >= JUDGED_YES_LOG_ODDS:
                        verdict = "yes"
                    elif value is not None and value <= JUDGED_NO_LOG_ODDS:
                        verdict = "no"
                    row["model"][order_name] = {
                        "source_id": sid,
                        "log_odds": None if value is None else round(value, 3),
                        "verdict": verdict,
                    }
            records.append(row)
    path = write_records(args.out, f"verdict-{args.split}.jsonl", records)
    print(f"{len(records)} yes/no questions -> {path}\n")
    print(verdict_table([path]))


if __name__ == "__main__":
    main()
