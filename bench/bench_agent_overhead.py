"""Agent overhead: the non-LLM time per ReAct step, sleuth vs LangChain's ``create_agent``.

Both frameworks drive the same instant scripted chat model (sleuth's own
:class:`~sleuth.llm.testing.ScriptedChatModel`, with one callable response repeated) over
the same tools and the same questions, so everything that is not the model and not the
tools is framework overhead: graph scheduling, state merging, message handling, tool
binding, events, traces, answer building and checks.

* **Model**: a fixed step pattern, decided from the conversation alone (no LLM), bound to
  the tools the way a provider's chat model binds them (see ``TimedScriptedChatModel``):
  step 1 calls ``rag_search(query=<question>)``, step 2 calls
  ``read_section(source_id=<top hit>)``, step 3 answers in plain text: the first sentence
  of the section read, cited as ``[source_id]``. A later call (sleuth's heuristic
  reflection may ask for one revision) answers again the same way. The replies are
  identical for both frameworks; its ``_generate`` is timed (model time, ~0).
* **Tools**: the same sleuth tool functions over the same ``KnowledgeBase``
  (``build_rag_tools``: hybrid search with the real embedding model, section reads from the
  catalog). For sleuth they run inside its registry; for LangChain each is wrapped as a
  ``StructuredTool`` (same argument schema) that calls ``Tool.invoke`` and returns
  ``ToolResult.observation()``, the same text sleuth sends to the model. The tool function
  itself is timed, identically for both (tool time). Argument validation and turning the
  result into the observation are counted as framework overhead on both sides.
* **sleuth**: ``AgentService.execute_agentic_search(question, "statutes", mode="react",
  use_memory=False)`` with an ``LLMReasoner`` over the scripted model, ``planner=heuristic``
  and ``reflection=heuristic`` (so the only model calls are the ReAct think steps; the
  deterministic planner and critic still run, as they are part of sleuth's loop), memory
  off (LangChain has none), SQLite catalog (each run is stored, as in production).
* **sleuth, reflection off**: the same with ``reflection=off`` — no critic, so no
  revision round: the same three model calls per run as LangChain (like for like).
* **LangChain**: ``langchain.agents.create_agent(model, tools, system_prompt=<sleuth's
  ReAct system prompt>)`` compiled once, ``agent.invoke({"messages": [question]})`` per run.
  Its ``ToolNode`` runs each tool in a worker thread; sleuth runs them in the caller's.
* The embedder runs with one torch thread (``--torch-threads``): with two, a query
  embedding on a machine whose cores are shared with other work waited at OpenMP barriers
  for up to 0.7 s (instead of ~25 ms), which made tool times erratic. Tool time is
  subtracted either way; one thread keeps it stable and keeps the spinning off the cores.

Per run: wall time, steps (= model calls), tool time, model time. Overhead per step =
(wall − tool time − model time) / steps. Reported over ``--n`` questions × ``--repeats``
(the runs interleave the three sides, the order rotating per question, after warm-up
runs): p50/p95/mean of the per-run per-step overhead, the ratio to LangChain, and the
overhead as a share of a typical 1-second LLM call. sleuth does more than LangChain: it
plans (heuristically), critiques the draft (reflection), validates citations and their
support, builds the answer, records steps, events and a trace, and stores the run. Its
overhead is therefore also reported without the post-answer work (reflection, finalize =
citation validation and answer building, and the run store), and as the ReAct loop alone
(the graph run minus the planning, reflection and finalize stages), with a breakdown from
the trace's ``timings_ms`` and timers around the graph and the run store.

Targets, for both sleuth configurations: mean overhead per step ≤ LangChain's, and < 50 ms
(5% of a 1 s LLM call). A micro-benchmark also times the tool specs ``LLMReasoner.decide``
builds on every step: ``tools.specs() + final_answer_spec()``, whose JSON schemas are
generated once per model class and deep-copied since commit 5638934
(``sleuth.tools.base.json_parameters``), against generating the same six schemas with
pydantic each time, as every step did before.

Data: a private copy of the statutes index in ``bench/results/statutes-data`` (built by
``bench_api_load.py`` / ``bench_ask.py --data-dir``); without it, only the BNS act is
ingested into a temporary directory (~360 chunks, a few minutes on CPU) and the questions
are drawn from its questions. Takes 30 s to 1 minute with the copy on 2 shared CPU cores
(model load ~5 s, warm-up, 3 sides × 50 questions × 3 repeats = 450 runs); ``--profile N``
then profiles N sleuth runs with cProfile. Results: ``bench/results/agent_overhead.json``.

    python bench/bench_agent_overhead.py [--n 50] [--repeats 3] [--seed 20251130]
                                         [--source DIR] [--profile 0] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from _common import (
    COLLECTION,
    RESULTS,
    Question,
    bench_settings,
    load_average,
    load_questions,
    percentile,
    print_header,
    private_copy,
    statute_paths,
    table,
    verdict,
)
from sleuth.agents.answer import AnswerDraft
from sleuth.agents.llm_reasoner import LLMReasoner, final_answer_spec
from sleuth.app import Sleuth
from sleuth.llm.testing import ScriptedChatModel
from sleuth.prompts import load_prompt
from sleuth.service import AgentService
from sleuth.tools.base import RunContext, Tool, ToolRegistry, ToolResult
from sleuth.tools.rag import build_rag_tools

LLM_CALL_S = 1.0
TARGET_SHARE = 0.05
TARGET_MS = LLM_CALL_S * TARGET_SHARE * 1e3
WARMUP_RUNS = 5
ANSWER_CHARS = 240
STAGES = ("think", "act", "plan", "reflect", "finalize")


# --------------------------------------------------------------------------- meters


@dataclass
class Meter:
    """Time spent inside the model and the tools during one run (reset per run)."""

    model_s: float = 0.0
    model_calls: int = 0
    tool_s: float = 0.0
    tool_calls: int = 0
    extra_s: dict[str, float] = field(default_factory=dict)

    def reset(self) -> None:
        self.model_s = self.tool_s = 0.0
        self.model_calls = self.tool_calls = 0
        self.extra_s = {}

    def add(self, key: str, seconds: float) -> None:
        self.extra_s[key] = self.extra_s.get(key, 0.0) + seconds


METER = Meter()


# --------------------------------------------------------------------------- the model


def _question(messages: Sequence[BaseMessage]) -> str:
    for message in messages:
        if isinstance(message, HumanMessage):
            return str(message.content)
    raise ValueError("no question in the conversation")


def _payload(message: ToolMessage) -> dict[str, Any]:
    """The JSON payload of a tool observation (``status`` line, then the JSON body)."""
    _, _, body = str(message.content).partition("\n")
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    cut = flat.find(". ", 40)
    sentence = flat[: cut + 1] if 0 < cut < ANSWER_CHARS else flat[:ANSWER_CHARS]
    return sentence.rstrip(" ,;:") or "The section applies."


def respond(messages: list[BaseMessage]) -> AIMessage:
    """The scripted step pattern: search, read the top hit, answer citing it."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    searches = [m for m in results if m.name == "rag_search"]
    reads = [m for m in results if m.name == "read_section"]
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    if not searches:
        args: dict[str, Any] = {"query": _question(messages)}
        return AIMessage(
            content="", tool_calls=[{"name": "rag_search", "args": args, "id": call_id}]
        )
    if not reads:
        hits = _payload(searches[-1]).get("results") or []
        if not hits:
            return AIMessage(content="The knowledge base does not contain the answer.")
        args = {"source_id": hits[0]["source_id"]}
        return AIMessage(
            content="", tool_calls=[{"name": "read_section", "args": args, "id": call_id}]
        )
    section = _payload(reads[-1])
    return AIMessage(
        content=f"{_first_sentence(str(section.get('text', '')))} [{section.get('source_id')}]"
    )


class TimedScriptedChatModel(ScriptedChatModel):
    """``ScriptedChatModel`` whose ``_generate`` time is added to :data:`METER`, and whose
    ``bind_tools`` binds like a provider's chat model (``ChatOpenAI`` & co.): the tools
    converted to OpenAI schemas, then ``self.bind(tools=...)``, a ``RunnableBinding`` over
    this same instance. (``ScriptedChatModel.bind_tools`` returns a new model copy, whose
    LangChain ``_serialized`` — a ``repr`` of the whole model with its tool schemas — is
    then recomputed on every call: ~1 ms per model call that no real provider costs.)
    """

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, Any]:
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        t0 = time.perf_counter()
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            METER.model_s += time.perf_counter() - t0
            METER.model_calls += 1


def scripted_model() -> TimedScriptedChatModel:
    """A fresh instant model replaying :func:`respond` forever (its call log is cleared by
    :func:`forget_calls` so that memory does not grow with the runs)."""
    return TimedScriptedChatModel([respond], repeat_last=True)


def forget_calls(model: ScriptedChatModel) -> None:
    model.calls.clear()
    model.call_tool_names.clear()


# --------------------------------------------------------------------------- the tools


def timed_tool(tool: Tool) -> Tool:
    """``tool`` with its function's time added to :data:`METER` (validation not included)."""
    func = tool.func

    def run(args: BaseModel, ctx: RunContext) -> ToolResult:
        t0 = time.perf_counter()
        try:
            return func(args, ctx)
        finally:
            METER.tool_s += time.perf_counter() - t0
            METER.tool_calls += 1

    return Tool(tool.name, tool.description, tool.args_schema, run)


def instrument_service(service: AgentService) -> None:
    """Time sleuth's tools, graph run and run store (instance attributes; src/ untouched)."""
    registry = service.tool_registry

    def timed_registry(memory: bool = False, mcp: bool = True) -> ToolRegistry:
        return ToolRegistry(timed_tool(t) for t in registry(memory=memory, mcp=mcp))

    service.tool_registry = timed_registry  # type: ignore[method-assign]
    service._graph = _TimedGraph(service._graph)
    store = service._store

    def timed_store(*args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            store(*args, **kwargs)
        finally:
            METER.add("store", time.perf_counter() - t0)

    service._store = timed_store  # type: ignore[method-assign]


class _TimedGraph:
    """Delegates to the compiled graph; times ``invoke``."""

    def __init__(self, graph: Any) -> None:
        self._graph = graph

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._graph.invoke(*args, **kwargs)
        finally:
            METER.add("graph", time.perf_counter() - t0)


class LangChainTools:
    """sleuth's tools as LangChain ``StructuredTool``s sharing a per-run ``RunContext``."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.ctx = RunContext(collection=COLLECTION)
        self.tools = [self._wrap(timed_tool(t)) for t in tools]

    def _wrap(self, tool: Tool) -> StructuredTool:
        def call(**kwargs: Any) -> str:
            return tool.invoke(kwargs, self.ctx).observation()

        return StructuredTool.from_function(
            func=call, name=tool.name, description=tool.description, args_schema=tool.args_schema
        )

    def new_run(self) -> None:
        self.ctx = RunContext(collection=COLLECTION)


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    """One timed run of one framework on one question."""

    framework: str
    question: int
    wall_s: float
    steps: int
    tool_s: float
    model_s: float
    tool_calls: int
    extra_s: dict[str, float] = field(default_factory=dict)
    stage_ms: dict[str, float] = field(default_factory=dict)
    status: str = ""
    cited: list[str] = field(default_factory=list)
    nodes: int = 0

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.tool_s - self.model_s

    def per_step_ms(self, seconds: float) -> float:
        return seconds / max(self.steps, 1) * 1e3

    @property
    def post_answer_s(self) -> float:
        """sleuth's work after the answer is drafted: reflection, finalize, run store."""
        stages = (self.stage_ms.get("reflect", 0.0) + self.stage_ms.get("finalize", 0.0)) / 1e3
        return stages + self.extra_s.get("store", 0.0)

    @property
    def loop_s(self) -> float:
        """The ReAct loop alone: the graph run minus tools, model, plan, reflect, finalize."""
        graph = self.extra_s.get("graph", 0.0)
        stages = sum(self.stage_ms.get(s, 0.0) for s in ("plan", "reflect", "finalize")) / 1e3
        return graph - self.tool_s - self.model_s - stages


def run_sleuth(
    service: AgentService, model: ScriptedChatModel, q: Question, name: str = "sleuth"
) -> Run:
    METER.reset()
    t0 = time.perf_counter()
    resp = service.execute_agentic_search(q.text, COLLECTION, mode="react", use_memory=False)
    wall = time.perf_counter() - t0
    forget_calls(model)
    return Run(
        framework=name,
        question=q.index,
        wall_s=wall,
        steps=METER.model_calls,
        tool_s=METER.tool_s,
        model_s=METER.model_s,
        tool_calls=METER.tool_calls,
        extra_s=dict(METER.extra_s),
        stage_ms={k: float(v) for k, v in resp.trace.get("timings_ms", {}).items()},
        status=resp.status.value,
        cited=[c.source_id for c in resp.answer.citations],
        # planner_path names every stage; a tool round's observation runs inside "act"
        nodes=len(path := resp.trace.get("planner_path", [])) - max(0, path.count("observe") - 1),
    )


def run_langchain(agent: Any, tools: LangChainTools, model: ScriptedChatModel, q: Question) -> Run:
    tools.new_run()
    METER.reset()
    t0 = time.perf_counter()
    out = agent.invoke({"messages": [HumanMessage(q.text)]})
    wall = time.perf_counter() - t0
    forget_calls(model)
    last = out["messages"][-1]
    text = str(last.content)
    cited = [text[text.rfind("[") + 1 : -1]] if text.endswith("]") else []
    model_nodes = sum(isinstance(m, AIMessage) for m in out["messages"])
    tool_nodes = sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in out["messages"])
    return Run(
        framework="langchain",
        question=q.index,
        wall_s=wall,
        steps=METER.model_calls,
        tool_s=METER.tool_s,
        model_s=METER.model_s,
        tool_calls=METER.tool_calls,
        status="answered" if isinstance(last, AIMessage) and not last.tool_calls else "?",
        cited=cited,
        nodes=model_nodes + tool_nodes,
    )


# --------------------------------------------------------------------------- data


def prepare_data(source: Path, ddir: Path) -> str:
    """Fill ``ddir`` with an index of the statutes; returns what was done."""
    if (source / "catalog.sqlite3").is_file() and (source / "indexes" / COLLECTION).is_dir():
        private_copy(source, ddir)
        return f"private copy of {source} (4 acts)"
    app = Sleuth(bench_settings(ddir))
    try:
        path = statute_paths(("the_bharatiya_nyaya_sanhita_2023.json",))
        report = app.pipeline.ingest(path, COLLECTION)
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
    finally:
        app.close()
        app.catalog.close()
    return "BNS act ingested into a temporary directory"


# --------------------------------------------------------------------------- report


def stats_row(name: str, values: Sequence[float]) -> list[Any]:
    mean = statistics.mean(values)
    return [
        name,
        percentile(values, 50),
        percentile(values, 95),
        mean,
        mean / (LLM_CALL_S * 1e3) * 100,
    ]


def per_step(runs: Sequence[Run], f: Callable[[Run], float]) -> list[float]:
    """``f(run)`` seconds per step, in ms, for each run."""
    return [r.per_step_ms(f(r)) for r in runs]


def mean_of(runs: Sequence[Run], f: Callable[[Run], float]) -> float:
    return statistics.mean(f(r) for r in runs)


def breakdown(runs: Sequence[Run]) -> list[tuple[str, float]]:
    """sleuth's overhead per run (ms), split by the trace's stage timings and our timers."""
    stage = {s: mean_of(runs, lambda r, s=s: r.stage_ms.get(s, 0.0)) for s in STAGES}
    graph = mean_of(runs, lambda r: r.extra_s.get("graph", 0.0) * 1e3)
    tool = mean_of(runs, lambda r: r.tool_s * 1e3)
    model = mean_of(runs, lambda r: r.model_s * 1e3)
    store = mean_of(runs, lambda r: r.extra_s.get("store", 0.0) * 1e3)
    wall = mean_of(runs, lambda r: r.wall_s * 1e3)
    return [
        ("think stage minus model (prompt, bind_tools + schemas, parse)", stage["think"] - model),
        ("act stage minus tools (validation, events, observation, trace)", stage["act"] - tool),
        ("plan (heuristic planner)", stage["plan"]),
        ("reflect (heuristic critic)", stage["reflect"]),
        ("finalize (citation validation, support check, answer)", stage["finalize"]),
        ("rest of the graph run (LangGraph, state, observe node)", graph - sum(stage.values())),
        ("outside the graph (checks, registry, trace, response)", wall - graph - store),
        ("run store (SQLite save_run)", store),
    ]


def spec_costs(service: AgentService, repeat: int = 300) -> list[tuple[str, float]]:
    """µs per think step: the tool specs ``LLMReasoner.decide`` builds (schemas cached per
    model class, deep-copied), against generating the same six JSON schemas with pydantic."""
    registry = ToolRegistry(build_rag_tools(service.kb))
    models = [t.args_schema for t in registry] + [AnswerDraft]

    def clock(f: Callable[[], object]) -> float:
        f()
        t0 = time.perf_counter()
        for _ in range(repeat):
            f()
        return (time.perf_counter() - t0) / repeat * 1e6

    return [
        ("tools.specs() + final_answer_spec() (cached schemas, deep-copied)",
         clock(lambda: [*registry.specs(), final_answer_spec()])),
        ("the six schemas generated by pydantic (each step, before 5638934)",
         clock(lambda: [m.model_json_schema() for m in models])),
    ]  # fmt: skip


def profile_sleuth(service: AgentService, model: ScriptedChatModel, qs: list[Question]) -> str:
    """cProfile of ``len(qs)`` sleuth runs: the top functions by own and cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for q in qs:
        run_sleuth(service, model, q)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="questions (50)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per question and side (3)")
    parser.add_argument("--seed", type=int, default=20251130, help="sample seed (20251130)")
    parser.add_argument(
        "--source", default=str(RESULTS / "statutes-data"), help="statutes data dir to copy"
    )
    parser.add_argument("--profile", type=int, default=0, help="then profile N sleuth runs (0)")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch intra-op threads for the embedder (1)"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.torch_threads)
    source = Path(args.source).expanduser().resolve()

    with tempfile.TemporaryDirectory(prefix="sleuth-bench-overhead-") as tmp:
        ddir = Path(tmp)
        t0 = time.perf_counter()
        data = prepare_data(source, ddir)
        setup_s = time.perf_counter() - t0
        questions = load_questions()
        if data.startswith("BNS"):
            questions = [q for q in questions if q.act == "BNS"]
        sample = sorted(random.Random(args.seed).sample(questions, args.n), key=lambda q: q.index)
        base = {"planner": "heuristic", "reflection": "heuristic", "memory": False}
        settings = bench_settings(ddir).model_copy(update=base)
        import langchain
        import langgraph.version

        print_header(
            "bench_agent_overhead: non-LLM time per ReAct step, sleuth vs LangChain create_agent",
            [
                ("index", data),
                ("questions", f"{len(sample)} of {len(questions)} (random.Random({args.seed}))"),
                ("runs", f"{args.repeats} per question and side, after {WARMUP_RUNS} warm-up"),
                ("model", "instant ScriptedChatModel: rag_search → read_section → cited answer"),
                ("sleuth", "react mode, planner=heuristic, reflection=heuristic | off, no memory"),
                (
                    "langchain / langgraph",
                    f"{langchain.__version__} / {langgraph.version.__version__} "
                    "(langchain.agents.create_agent)",
                ),
            ],
        )
        app = Sleuth(settings)
        sl_model, off_model, lc_model = scripted_model(), scripted_model(), scripted_model()
        service = AgentService(
            settings, app.kb, reasoner=LLMReasoner(sl_model, "scripted"), memory=app.memory
        )
        service_off = AgentService(
            settings.model_copy(update={"reflection": "off"}),
            app.kb,
            reasoner=LLMReasoner(off_model, "scripted"),
            memory=app.memory,
        )
        instrument_service(service)
        instrument_service(service_off)
        lc_tools = LangChainTools(build_rag_tools(app.kb))
        system = load_prompt("react_system").replace("{collection}", COLLECTION)
        agent = create_agent(lc_model, lc_tools.tools, system_prompt=system)
        sides: dict[str, Callable[[Question], Run]] = {
            "sleuth": lambda q: run_sleuth(service, sl_model, q, "sleuth"),
            "sleuth_off": lambda q: run_sleuth(service_off, off_model, q, "sleuth_off"),
            "langchain": lambda q: run_langchain(agent, lc_tools, lc_model, q),
        }

        t0 = time.perf_counter()
        _ = app.kb.embedder
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for q in sample[:WARMUP_RUNS]:
            for side in sides.values():
                side(q)
        warm_s = time.perf_counter() - t0
        print(
            f"setup {setup_s:.1f} s; model load {load_s:.1f} s; "
            f"{WARMUP_RUNS} warm-up runs per side {warm_s:.1f} s"
        )
        print(f"load average before the timed runs: {load_average()}")
        print()

        runs: list[Run] = []
        order = list(sides)
        t0 = time.perf_counter()
        for rep in range(args.repeats):
            for i, q in enumerate(sample):
                k = (i + rep) % len(order)  # rotate which side runs first
                runs.extend(sides[name](q) for name in order[k:] + order[:k])
        timed_s = time.perf_counter() - t0
        load_after = load_average()
        by = {name: [r for r in runs if r.framework == name] for name in order}
        sl, off, lc = by["sleuth"], by["sleuth_off"], by["langchain"]

        def row(label: str, f: Callable[[Run], float]) -> list[Any]:
            return [label, *(mean_of(by[name], f) for name in order)]

        agree = sum(a.cited[:1] == b.cited[:1] for a, b in zip(sl, lc, strict=True)) / len(sl)
        print(
            table(
                ["mean per run", "sleuth", "reflection off", "langchain"],
                [
                    ["runs", *(len(by[name]) for name in order)],
                    row("steps (model calls)", lambda r: r.steps),
                    row("tool calls", lambda r: r.tool_calls),
                    row("graph nodes run", lambda r: r.nodes),
                    row("wall (ms)", lambda r: r.wall_s * 1e3),
                    row("tool time (ms)", lambda r: r.tool_s * 1e3),
                    row("model time (ms)", lambda r: r.model_s * 1e3),
                    row("overhead (ms)", lambda r: r.overhead_s * 1e3),
                ],
                title=f"Runs ({timed_s:.0f} s timed; load average after: {load_after})",
            )
        )
        print(f"sleuth and langchain cite the same section: {agree:.0%} of runs")
        print()

        rows = {
            "langchain create_agent (whole invoke)": per_step(lc, lambda r: r.overhead_s),
            "sleuth, whole execute_agentic_search": per_step(sl, lambda r: r.overhead_s),
            "sleuth, without post-answer work*": per_step(
                sl, lambda r: r.overhead_s - r.post_answer_s
            ),
            "sleuth, ReAct loop only**": per_step(sl, lambda r: r.loop_s),
            "sleuth reflection off, whole": per_step(off, lambda r: r.overhead_s),
            "sleuth reflection off, without post-answer*": per_step(
                off, lambda r: r.overhead_s - r.post_answer_s
            ),
            "sleuth reflection off, loop only**": per_step(off, lambda r: r.loop_s),
        }
        print(
            table(
                ["overhead per step (ms)", "p50", "p95", "mean", "% of 1 s call"],
                [stats_row(name, v) for name, v in rows.items()],
                title="Overhead per ReAct step = (wall − tool time − model time) / model calls",
            )
        )
        print(
            "*  minus reflection, finalize (citation validation + support check, answer "
            "building) and the run store\n"
            "** the graph run minus tools, model and the plan / reflect / finalize stages "
            "(LangGraph, state, observe/think/act bookkeeping, events, reasoner prompt/bind/parse)"
        )
        print()
        lc_mean = statistics.mean(rows["langchain create_agent (whole invoke)"])
        ratios = {name: statistics.mean(v) / lc_mean for name, v in list(rows.items())[1:]}
        print("ratio to langchain (mean per step): " + "; ".join(
            f"{name.rstrip('*')} {r:.2f}×" for name, r in ratios.items()
        ))  # fmt: skip
        print()

        parts, parts_off = breakdown(sl), breakdown(off)
        steps, steps_off = mean_of(sl, lambda r: r.steps), mean_of(off, lambda r: r.steps)
        total, total_off = sum(v for _, v in parts), sum(v for _, v in parts_off)
        print(
            table(
                ["sleuth overhead (mean)", "ms/run", "ms/step", "share", "off: ms/step"],
                [
                    [k, v, v / steps, f"{v / total:.0%}", v_off / steps_off]
                    for (k, v), (_, v_off) in zip(parts, parts_off, strict=True)
                ]
                + [["total", total, total / steps, "100%", total_off / steps_off]],
                title=f"Where sleuth's overhead goes ({steps:.2f} steps per run; last column: "
                f"reflection off, {steps_off:.2f} steps)",
            )
        )
        print()
        statuses = {s: sum(r.status == s for r in sl) for s in sorted({r.status for r in sl})}
        revisions = sum(r.stage_ms.get("reflect", 0.0) > 0 and r.steps > 3 for r in sl)
        print(
            f"sleuth statuses: {statuses}; runs where the critic asked for a revision (a 4th "
            f"model call): {revisions}/{len(sl)}"
        )
        print()
        costs = spec_costs(service)
        print(
            table(
                ["tool specs built every think step by LLMReasoner.decide", "µs per step"],
                costs,
                title="Tool specs per think step (micro-benchmark, 300 calls each)",
            )
        )
        print()

        targets = []
        for name, key in (
            ("sleuth", "sleuth, whole execute_agentic_search"),
            ("sleuth reflection off", "sleuth reflection off, whole"),
        ):
            value = statistics.mean(rows[key])
            targets += [
                (f"{name}: overhead per step ≤ langchain's (mean ms)", value, lc_mean),
                (f"{name}: overhead per step < {TARGET_MS:.0f} ms (mean)", value, TARGET_MS),
            ]  # fmt: skip
        for label, value, target in targets:
            print(
                f"Target: {label}: {value:.2f} vs {target:.2f} → "
                f"{verdict(value, target, higher_is_better=False)}"
            )
        print(f"load average at the end: {load_average()}")

        profile = ""
        if args.profile:
            profile = profile_sleuth(service, sl_model, sample[: args.profile])
            print()
            print(f"cProfile of {args.profile} sleuth runs (profiler overhead inflates times):")
            print(profile)

        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / "agent_overhead.json"
        out.write_text(
            json.dumps(
                {
                    "load_average_after": load_after,
                    "index": data,
                    "questions": [q.index for q in sample],
                    "repeats": args.repeats,
                    "per_step_ms": {
                        name: {
                            "p50": percentile(v, 50),
                            "p95": percentile(v, 95),
                            "mean": statistics.mean(v),
                            "pct_of_1s_call": statistics.mean(v) / (LLM_CALL_S * 1e3) * 100,
                        }
                        for name, v in rows.items()
                    },
                    "ratio_to_langchain_mean": ratios,
                    "sleuth_breakdown_ms_per_run": dict(parts),
                    "sleuth_reflection_off_breakdown_ms_per_run": dict(parts_off),
                    "spec_costs_us_per_step": dict(costs),
                    "targets": {label: verdict(v, t, higher_is_better=False)
                                for label, v, t in targets},
                    "runs": [r.__dict__ for r in runs],
                    "profile": profile,
                },
                indent=1,
                default=str,
            ),
            encoding="utf-8",
        )  # fmt: skip
        print(f"results: {out}")
        app.close()
        app.catalog.close()


if __name__ == "__main__":
    main()
