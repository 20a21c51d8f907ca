"""Runs against a misbehaving model or tool server: how far past its deadline a run ends.

A loopback OpenAI-compatible server (``tests/integration/fault_server.py``) either never
answers (``hang``) or answers after a delay longer than the run has (``slow``); each run of
each mode (guided, react) is given ``--deadline`` seconds (``timeout_s``) over the BNS, BNSS
and BSA with the bundled embedder, and the seconds past the deadline at which it returned
are measured, with its status. A third fault, ``mcp_hang`` (ReAct only: guided mode calls no
MCP tool), has the model search, then call the ``wait`` tool of an MCP server over stdio
(``tests/integration/mcp_fixture_server.py hang``) that never returns although its own
``timeout_s`` is 60 s. The target (issue 28): every run ends ``timeout`` within deadline +
2 s.

    python bench/bench_faults.py --runs 5 --deadline 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ACTS_3, bench_settings, data_dir, load_average, print_header, statute_paths

QUESTIONS = (
    "What is the punishment for murder?",
    "Can a police officer arrest without a warrant?",
    "Is a confession made to a police officer admissible?",
    "What is the punishment for theft?",
    "How long can the police keep someone in custody without a magistrate?",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per mode and fault")
    parser.add_argument("--deadline", type=float, default=5.0, help="timeout_s of each run")
    parser.add_argument("--data-dir", help="keep the index here (default: a temp dir)")
    args = parser.parse_args()

    from tests.integration.fault_server import FaultServer, hang, reply

    from sleuth.app import Sleuth
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True

    def slow(seconds: float) -> Any:
        inner = reply("Facts: too late [1]\nAnswer: too late")

        def run(server: Any, body: Any, handler: Any) -> None:
            server.stopping.wait(seconds)
            inner(server, body, handler)

        return run

    print_header("bench_faults", [("runs", str(args.runs)), ("deadline s", str(args.deadline))])
    faults = {"hang": hang(), "slow": slow(args.deadline * 3)}
    rows = []
    with data_dir(args.data_dir, "sleuth-faults-") as ddir:
        base = bench_settings(ddir)
        Sleuth(base).pipeline.ingest(statute_paths(ACTS_3), "statutes")
        for fault, behaviour in faults.items():
            with FaultServer([behaviour]) as server:
                app = Sleuth(against(base, server))
                for mode in ("guided", "react"):
                    over: list[float] = []
                    statuses: list[str] = []
                    for i in range(args.runs):
                        started = time.monotonic()
                        response = app.agent.execute_agentic_search(
                            QUESTIONS[i % len(QUESTIONS)],
                            "statutes",
                            mode=mode,  # type: ignore[arg-type]
                            timeout_s=args.deadline,
                        )
                        over.append(time.monotonic() - started - args.deadline)
                        statuses.append(response.status.value)
                    rows.append((fault, mode, over, statuses))
                app.close()
        rows.append(("mcp_hang", "react", *mcp_hang(base, args.runs, args.deadline)))
    print("| fault | mode | runs | status timeout | past deadline p50 s | max s |")
    print("|---|---|---|---|---|---|")
    for fault, mode, over, statuses in rows:
        share = statuses.count("timeout") / len(statuses)
        print(
            f"| {fault} | {mode} | {len(over)} | {share:.2f} | "
            f"{statistics.median(over):+.2f} | {max(over):+.2f} |"
        )
    print(f"\nload average at the end: {load_average()}")


def against(base: Any, server: Any, **extra: Any) -> Any:
    """``base`` settings pointed at the fault ``server`` (memory off), with ``extra``."""
    update = {"llm": "openai:fault", "llm_base_url": server.url, "llm_api_key": "none"}
    return base.model_copy(update={**update, "memory": False, **extra})


def mcp_hang(base: Any, runs: int, deadline: float) -> tuple[list[float], list[str]]:
    """Seconds past ``deadline`` and statuses of ReAct runs whose model calls a hung MCP
    tool (the server's own ``timeout_s``: 60 s)."""
    import json

    from tests.integration.fault_server import FaultServer, reply, tool_call

    from sleuth.app import Sleuth

    fixture = Path(__file__).resolve().parents[1] / "tests/integration/mcp_fixture_server.py"
    spec = {"name": "slow", "command": sys.executable, "args": [str(fixture), "hang"]}
    script = [
        reply("", tool_calls=[tool_call("rag_search", {"query": "punishment for murder"})]),
        reply("", tool_calls=[tool_call("slow__wait", {"seconds": 1})]),
        reply("Murder is punished with death or imprisonment for life [BNS_S103]."),
    ]
    over: list[float] = []
    statuses: list[str] = []
    for i in range(runs):
        with FaultServer(script) as server:
            app = Sleuth(against(base, server, mcp_servers=json.dumps([{**spec, "timeout_s": 60}])))
            app.agent.mcp  # noqa: B018 - discovery (the server's start) is not the run's time
            started = time.monotonic()
            response = app.agent.execute_agentic_search(
                QUESTIONS[i % len(QUESTIONS)], "statutes", mode="react", timeout_s=deadline
            )
            over.append(time.monotonic() - started - deadline)
            statuses.append(response.status.value)
            app.close()
    return over, statuses


if __name__ == "__main__":
    main()
