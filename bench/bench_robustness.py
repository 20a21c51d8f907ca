"""Malformed model output over the wire: tracebacks, decoys taken, reasoning leaked.

``--cases`` (60) generated model behaviours, each a seeded combination of

- a **reasoning shape** around the reply: none, ``<think>…</think>``, ``<thinking>…``,
  ``<reasoning>…``, a bare ``</think>`` (the template opened the block), an unclosed
  ``<think>`` before the reply (everything is reasoning) or after it, or the
  ``reasoning_content`` field of OpenAI-compatible servers;
- a **decoy** inside that reasoning: a search call for ``DECOYQUERY``, a final-answer call
  or a skip-retrieval object answering ``DECOYANSWER``;
- the **tool call** form of the first reply: structured ``tool_calls``, its arguments
  encoded twice, a JSON object in the text, fenced, in ``<tool_call>`` tags, after a
  ``functions.rag_search:`` prefix, followed by prose, or cut inside its string argument;
- the **answer** form of the later replies: plain cited text, ``Facts:/Answer:``, fenced,
  a JSON object, followed by chat prose, or empty;
- a **transport fault** on one request: none, a 500, a connection dropped mid-body;

served by the loopback OpenAI-compatible fault server of the integration tests
(``tests/integration/fault_server.py``), and run through
``AgentService.execute_agentic_search`` in both modes over the BNS, BNSS and BSA (bundled
embedder, the reranker and support model on), with an event sink so the answer is streamed
(``answer_delta``) as it is to API and CLI users. Per run it counts:

- **tracebacks**: an exception out of the run, or a run ending ``error`` with no message;
- **decoys used**: ``DECOYQUERY`` in any tool call, ``DECOYANSWER`` in the answer or the
  streamed text, or retrieval skipped;
- **markup**: fence, tool-call or JSON markup of the reply's form in the answer;
- **reasoning leaks**: the reasoning's marker (``SECRETTHOUGHT``) or a reasoning tag in the
  answer, its citations' quotes, any tool call's arguments or the streamed answer text
  (a ``thought`` event may show it: that is where reasoning belongs).

Also the statuses (a ReAct run whose model never gave a usable reply ends ``error`` with
the reason) and the share of answers citing the murder section. Target (issue 28): 0
tracebacks, decoys, leaks and markup. Records to ``bench/results/robustness.jsonl``.

    python bench/bench_robustness.py --cases 60
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (
    ACTS_3,
    bench_settings,
    commit,
    data_dir,
    load_average,
    print_header,
    statute_paths,
    write_records,
)

QUESTION = "What is the punishment for murder?"
QUERY = "punishment for murder"
MARK = "SECRETTHOUGHT"
TAGS = ("<think", "</think", "<thinking", "</thinking", "<reasoning", "</reasoning")
MARKUP = ("```", "<tool_call", "</tool_call", '{"name"', '"arguments"', "functions.rag_search")
"""Call or fence markup that must not reach an answer (the reply's form, not its content)."""

REASONING = (
    "none",
    "think",
    "thinking",
    "reasoning",
    "bare_close",
    "unclosed_before",
    "unclosed_after",
    "field",
)
DECOYS = {
    "search": {"name": "rag_search", "arguments": {"query": "DECOYQUERY"}},
    "answer": {"name": "final_answer", "arguments": {"answer_text": "DECOYANSWER"}},
    "skip": {"skip_retrieval": "llm_only", "answer": "DECOYANSWER"},
}
CALLS = (
    "structured",
    "structured_twice_encoded",
    "json_text",
    "fenced",
    "tool_tag",
    "functions_prefix",
    "trailing_prose",
    "cut_in_string",
)
ANSWERS = ("plain", "facts_answer", "fenced", "json", "trailing_prose", "empty")
FAULTS = ("none", "http_500", "dropped")
OPENS_THINK = "{% if add_generation_prompt %}{{ '<|Assistant|><think>\\n' }}{% endif %}"
"""A chat template that opens the reasoning block (as DeepSeek-R1's does): served in
``/props`` for the bare-closing-tag shape, the one a server produces with such a template."""
ANSWER = "Murder is punished with death or imprisonment for life [BNS_S103]."


def cases(count: int, seed: int) -> list[dict[str, str]]:
    """``count`` behaviours: every reasoning shape, call form and answer form in turn
    (so each appears about equally), the decoy and the fault drawn from ``seed``."""
    rng = random.Random(seed)
    calls, answers = list(CALLS), list(ANSWERS)
    rng.shuffle(calls)
    rng.shuffle(answers)
    return [
        {
            "reasoning": REASONING[i % len(REASONING)],
            "decoy": rng.choice(sorted(DECOYS)),
            "call": calls[i % len(calls)],
            "answer": answers[i % len(answers)],
            "fault": rng.choices(FAULTS, weights=(4, 1, 1))[0],
        }
        for i in range(count)
    ]


def wrapped(payload: str, case: dict[str, str]) -> tuple[str, str | None]:
    """``(content, reasoning_content)`` of a reply whose visible part is ``payload``."""
    thought = f"{MARK} I could try {json.dumps(DECOYS[case['decoy']])} first. {MARK}"
    shape = case["reasoning"]
    if shape in ("think", "thinking", "reasoning"):
        return f"<{shape}>{thought}</{shape}>{payload}", None
    if shape == "bare_close":
        return f"{thought}</think>{payload}", None
    if shape == "unclosed_before":
        return f"<think>{thought} {payload}", None
    if shape == "unclosed_after":
        return f"{payload}\n<think>{thought}", None
    if shape == "field":
        return payload, thought
    return payload, None


def call_reply(case: dict[str, str]) -> Any:
    """The first reply: a ``rag_search`` call in the case's form."""
    from tests.integration.fault_server import reply, tool_call

    arguments = {"query": QUERY}
    text = json.dumps({"name": "rag_search", "arguments": arguments})
    form = case["call"]
    if form.startswith("structured"):
        content, reasoning = wrapped("", case)
        call = tool_call("rag_search", arguments, double_encoded=form.endswith("encoded"))
        return reply(content, tool_calls=[call], reasoning_content=reasoning)
    payload = {
        "json_text": text,
        "fenced": f"```json\n{text}\n```",
        "tool_tag": f"<tool_call>\n{text}\n</tool_call>",
        "functions_prefix": f"functions.rag_search: {json.dumps(arguments)}",
        "trailing_prose": f"{text}\nI will look this up first.",
        "cut_in_string": text[: text.index(QUERY) + 8],
    }[form]
    content, reasoning = wrapped(payload, case)
    return reply(content, reasoning_content=reasoning)


def answer_reply(case: dict[str, str]) -> Any:
    """The later replies: the answer in the case's form."""
    from tests.integration.fault_server import reply

    payload = {
        "plain": ANSWER,
        "facts_answer": "Facts: death or imprisonment for life [1]\nAnswer: death",
        "fenced": f"```\n{ANSWER}\n```",
        "json": json.dumps({"answer": ANSWER}),
        "trailing_prose": f"{ANSWER}\n\nLet me know if you need anything else!",
        "empty": "",
    }[case["answer"]]
    content, reasoning = wrapped(payload, case)
    return reply(content, reasoning_content=reasoning)


def script(case: dict[str, str]) -> list[Any]:
    """The server's replies for one run: the call, the answer (repeated), with the fault
    in place of the second request."""
    from tests.integration.fault_server import drop, error

    fault = {"none": None, "http_500": error(500, "internal error"), "dropped": drop()}
    first, later = call_reply(case), answer_reply(case)
    extra = fault[case["fault"]]
    return [first, later] if extra is None else [first, extra, later]


def leaks(text: str) -> bool:
    """Whether ``text`` shows the reasoning's marker or a reasoning tag."""
    lowered = text.lower()
    return MARK.lower() in lowered or any(tag in lowered for tag in TAGS)


def judge(response: Any, events: list[Any]) -> dict[str, Any]:
    """The run's counts (see the module doc) from its response and emitted events."""
    answer = response.answer
    tool_args = json.dumps([t.get("args") or t.get("arguments") for t in response.tool_calls])
    quotes = " ".join(str(getattr(c, "quote", "") or "") for c in answer.citations)
    streamed = "".join(
        str(getattr(e, "delta", "")) for e in events if getattr(e, "type", "") == "answer_delta"
    )
    status = response.status.value
    error_text = (response.trace or {}).get("error")
    return {
        "status": status,
        "traceback": status == "error" and not error_text,
        "error": error_text,
        "decoy_used": "DECOYQUERY" in json.dumps(response.tool_calls, default=str)
        or "DECOYANSWER" in answer.answer_text
        or "DECOYANSWER" in streamed
        or not response.trace.get("retrieved_source_ids"),
        "reasoning_leak": [
            name
            for name, text in (
                ("answer", answer.answer_text),
                ("quotes", quotes),
                ("tool_args", tool_args),
                ("streamed", streamed),
            )
            if leaks(text)
        ],
        "markup": any(m in answer.answer_text for m in MARKUP),
        "cites_gold": "BNS_S103" in [c.source_id for c in answer.citations],
        "answer_source": response.trace.get("answer_source"),
        "answer_text": answer.answer_text[:300],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=60, help="generated behaviours")
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--data-dir", help="keep the index here (default: a temp dir)")
    parser.add_argument("--out", default="bench/results", help="records folder")
    args = parser.parse_args()

    from tests.integration.fault_server import FaultServer

    from sleuth.app import Sleuth
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True
    print_header("bench_robustness", [("cases", str(args.cases)), ("seed", str(args.seed))])
    records = []
    started = time.perf_counter()
    with data_dir(args.data_dir, "sleuth-robust-") as ddir:
        base = bench_settings(ddir)
        Sleuth(base).pipeline.ingest(statute_paths(ACTS_3), "statutes")
        for number, case in enumerate(cases(args.cases, args.seed)):
            for mode in ("guided", "react"):
                template = OPENS_THINK if case["reasoning"] == "bare_close" else None
                with FaultServer(script(case), chat_template=template) as server:
                    app = Sleuth(
                        base.model_copy(
                            update={
                                "llm": "openai:fault",
                                "llm_base_url": server.url,
                                "llm_api_key": "none",
                                "memory": False,
                            }
                        )
                    )
                    events: list[Any] = []
                    t0 = time.perf_counter()
                    try:
                        response = app.agent.execute_agentic_search(
                            QUESTION, "statutes", mode=mode, sinks=[events.append]
                        )
                        row = judge(response, events)
                    except Exception as exc:  # what the bench counts
                        row = {"status": "raised", "traceback": True, "error": repr(exc)}
                    finally:
                        app.close()
                    row.update(case=number, mode=mode, **case)
                    row["seconds"] = round(time.perf_counter() - t0, 2)
                    records.append(row)
    path = write_records(args.out, "robustness.jsonl", records)
    print(f"{len(records)} runs in {time.perf_counter() - started:.0f} s -> {path}")
    print(f"commit {commit()}; load average at the end: {load_average()}\n")
    print(
        "| by | value | runs | tracebacks | decoys used | reasoning leaks | markup | gold cited |"
    )
    print("|---|---|---|---|---|---|---|---|")
    groups: list[tuple[str, str]] = [("all", "all")]
    groups += [("mode", m) for m in ("guided", "react")]
    groups += [("reasoning", r) for r in REASONING]
    groups += [("call", c) for c in CALLS] + [("answer", a) for a in ANSWERS]
    groups += [("fault", f) for f in FAULTS]
    for key, value in groups:
        rows = [r for r in records if key == "all" or r.get(key) == value]
        if not rows:
            continue
        print(
            f"| {key} | {value} | {len(rows)} | {sum(r['traceback'] for r in rows)} | "
            f"{sum(bool(r.get('decoy_used')) for r in rows)} | "
            f"{sum(bool(r.get('reasoning_leak')) for r in rows)} | "
            f"{sum(bool(r.get('markup')) for r in rows)} | "
            f"{sum(bool(r.get('cites_gold')) for r in rows) / len(rows):.2f} |"
        )
    statuses = Counter(f"{r['mode']}:{r['status']}" for r in records)
    print("\nstatuses:", dict(sorted(statuses.items())))
    checks = ("traceback", "decoy_used", "reasoning_leak", "markup")
    bad = [r for r in records if any(r.get(check) for check in checks)]
    for r in bad:
        print("FAILED", json.dumps(r, ensure_ascii=False)[:600])
    total = sum(r["traceback"] for r in records), len(bad)
    print(
        f"\ntarget 0 tracebacks, decoys, leaks, markup: {'MET' if not bad else 'MISSED'} "
        f"(tracebacks {total[0]}, runs failing a check {total[1]})"
    )


if __name__ == "__main__":
    main()
