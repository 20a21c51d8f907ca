"""The guided runtime: structured agents (scripted models), fallbacks, and the control graph."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.events import EventEmitter
from sleuth.agents.generation import EvidenceSection, generate_draft
from sleuth.agents.guided import GuidedResult, GuidedRuntime
from sleuth.agents.guided.agents import (
    approx_tokens,
    compress_evidence,
    decompose_question,
    evaluate_evidence,
    heuristic_compression,
    heuristic_decomposition,
    heuristic_plan,
    heuristic_refinement,
    heuristic_route,
    heuristic_verdict,
    parse_intent,
    plan_question,
    refine_query,
)
from sleuth.agents.guided.schemas import CragVerdict, Plan
from sleuth.agents.question import is_multi_part, split_question
from sleuth.agents.state import RunStatus
from sleuth.agents.structured import call_structured
from sleuth.app import Sleuth
from sleuth.llm.testing import ScriptedChatModel, final, tool_call
from sleuth.retrieval.text import key_phrase, novel_query, sentences, terms
from sleuth.tools.base import RunContext, ToolRegistry
from sleuth.tools.rag import build_rag_tools
from tests.helpers import STATUTE_SECTIONS, make_app

MURDER = "What is the punishment for murder?"
TWO_PART = "What is the punishment for murder and what is theft?"
TRACE_KEYS = {
    "planner_runtime",
    "planner_run_id",
    "planner_path",
    "tool_trace",
    "output_validation_retries",
    "agentic",
    "timings_ms",
}
AGENT_TOOLS = (
    "intent_parse",
    "plan",
    "crag_verdict",
    "refine_query",
    "decompose",
    "compress_context",
    "final_answer",
)

EVIDENCE = [
    EvidenceSection(
        source_id=sid, title=f"Test Act > Section {sid.split('_S')[-1]}. {title}", text=text
    )
    for sid, (title, text) in STATUTE_SECTIONS.items()
]


FALLBACK_DRAFT = AnswerDraft(answer_text="extractive fallback", is_insufficient_context=True)

# ---------------------------------------------------------------- helpers


class AgentScript:
    """A scripted model for a whole guided run: one queue of replies per agent.

    Each call is routed by the agent tool named in the system prompt (```plan```,
    ```crag_verdict```...); a dict reply becomes a call of that tool; the last reply of a
    queue repeats. ``seen[agent]`` keeps the messages each agent received.
    """

    def __init__(self, **queues: list[Any]) -> None:
        self.queues = {name: list(replies) for name, replies in queues.items()}
        self.seen: dict[str, list[list[BaseMessage]]] = defaultdict(list)
        self.model = ScriptedChatModel([self], repeat_last=True)

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        system = str(messages[0].content)
        name = next((n for n in AGENT_TOOLS if f"`{n}`" in system), "direct")
        if "numbered evidence" in system:  # the generator asks for a plain-text answer
            name = "final_answer"
        self.seen[name].append(messages)
        queue = self.queues[name]
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if callable(reply) and not isinstance(reply, BaseMessage):
            reply = reply(messages)
        if isinstance(reply, dict):
            return tool_call(name, reply)
        return reply if isinstance(reply, AIMessage) else AIMessage(content=str(reply))


def run_guided(
    app: Sleuth, question: str, model: Any = None, **kwargs: Any
) -> tuple[GuidedResult, list[Any], RunContext]:
    events: list[Any] = []
    emitter = EventEmitter("task-1", [events.append])
    ctx = RunContext(collection="test", scorer=kwargs.pop("scorer", None))
    tools = ToolRegistry(build_rag_tools(app.kb))
    kwargs.setdefault("deadline", time.monotonic() + 60)
    kwargs.setdefault("llm_agents", "all")  # every agent asks the scripted model
    result = GuidedRuntime().run(question, ctx, tools, emitter, model, **kwargs)
    return result, events, ctx


def searches(result: GuidedResult) -> list[str]:
    return [c["arguments"]["query"] for c in result.tool_calls if c["tool"] == "rag_search"]


def thoughts(events: list[Any]) -> list[str]:
    return [e.content for e in events if e.type == "think"]


@pytest.fixture
def app(tmp_path: Path) -> Sleuth:
    return make_app(tmp_path)


# ---------------------------------------------------------------- each agent: 3 paths

AgentCall = Callable[[Any, int], Any]

CASES: dict[str, tuple[str, AgentCall, dict[str, Any], dict[str, Any], Any]] = {
    "intent_parser": (
        "intent_parse",
        lambda m, n: parse_intent(MURDER, m, max_retries=n),
        {
            "retrieval_profile": "balanced",
            "normalized_query": "murder punishment",
            "graph_hint": False,
            "granularity": "passage",
            "confidence": 0.8,
        },
        {
            "retrieval_profile": "balanced",
            "normalized_query": "murder",
            "graph_hint": False,
            "granularity": "passage",
            "confidence": 1.7,
        },
        heuristic_route(MURDER),
    ),
    "planner": (
        "plan",
        lambda m, n: plan_question(MURDER, m, max_retries=n),
        {"intent_class": "documentary", "primary_query": "murder punishment"},
        # output validator: llm_only is for conversational messages only
        {"intent_class": "documentary", "skip_retrieval": "llm_only", "primary_query": "x"},
        heuristic_plan(MURDER),
    ),
    "crag_evaluator": (
        "crag_verdict",
        lambda m, n: evaluate_evidence(MURDER, EVIDENCE[:1], m, max_retries=n),
        {"verdict": "partial", "missing_information": "punishment", "rationale": "no penalty"},
        {"verdict": "PARTIAL", "missing_information": ""},  # a gap verdict needs its gap
        heuristic_verdict(MURDER, EVIDENCE[:1]),
    ),
    "refinement": (
        "refine_query",
        lambda m, n: refine_query(
            MURDER,
            CragVerdict(verdict="PARTIAL", missing_information="punishment"),
            ["murder"],
            m,
            max_retries=n,
        ),
        {"refined_query": "punishment for murder", "rationale": "target the penalty"},
        {"refined_query": "Murder"},  # repeats a query already tried
        heuristic_refinement(MURDER, "punishment", ["murder"]),
    ),
    "decomposition": (
        "decompose",
        lambda m, n: decompose_question(TWO_PART, m, max_retries=n),
        {"sub_questions": ["What is the punishment for murder?", "What is theft?"]},
        {"sub_questions": ["What is the punishment for murder and theft?"]},
        heuristic_decomposition(TWO_PART),
    ),
    "compression": (
        "compress_context",
        lambda m, n: compress_evidence(MURDER, set(terms(MURDER)), EVIDENCE, 200, m, max_retries=n),
        {
            "passages": [
                {
                    "source_id": "BNS_S103",
                    "text": "(1) Whoever commits murder shall be punished with death or "
                    "imprisonment for life, and shall also be liable to fine.",
                }
            ]
        },
        {"passages": [{"source_id": "BNS_S103", "text": "Murderers get life in prison."}]},
        heuristic_compression(set(terms(MURDER)), EVIDENCE, 200),
    ),
}


@pytest.mark.parametrize("agent", list(CASES))
def test_agent_valid_output_is_used_on_the_first_call(agent: str) -> None:
    tool, call, valid, _, _ = CASES[agent]
    model = ScriptedChatModel([tool_call(tool, valid)])
    result = call(model, 2)
    assert result.path == "llm" and result.retries == 0 and result.errors == []
    assert model.call_tool_names == [[tool]]  # the schema is the only tool, forced by name
    for key, value in valid.items():
        got = getattr(result.value, key)
        if isinstance(value, str) and key == "verdict":
            value = value.upper()
        if isinstance(value, list) and value and isinstance(value[0], dict):
            got = [p.model_dump() for p in got]
        assert got == value


@pytest.mark.parametrize("agent", list(CASES))
def test_agent_invalid_then_valid_output_is_corrected_after_one_retry(agent: str) -> None:
    tool, call, valid, invalid, _ = CASES[agent]
    model = ScriptedChatModel([tool_call(tool, invalid), tool_call(tool, valid)])
    result = call(model, 2)
    assert result.path == "llm_after_retry"
    assert result.retries == 1
    assert len(result.errors) == 1 and tool in result.errors[0]
    # the model saw its mistake: the second request answers the bad call with the error
    feedback = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert feedback and "Please fix your mistakes" in str(feedback[-1].content)


@pytest.mark.parametrize("agent", list(CASES))
def test_agent_always_invalid_output_falls_back_after_max_retries(agent: str) -> None:
    tool, call, _, invalid, expected = CASES[agent]
    model = ScriptedChatModel([tool_call(tool, invalid)], repeat_last=True)
    result = call(model, 2)
    assert result.path == "fallback"
    assert result.retries == 2
    assert len(model.calls) == 3 and len(result.errors) == 3
    assert result.value == expected


@pytest.mark.parametrize("agent", list(CASES))
def test_agent_without_a_model_uses_its_heuristic(agent: str) -> None:
    _, call, _, _, expected = CASES[agent]
    result = call(None, 2)
    assert (result.path, result.retries, result.value) == ("fallback", 0, expected)


# ---------------------------------------------------------------- generator (plain text)


def test_generator_keeps_the_models_plain_text_answer_and_numbers_the_evidence() -> None:
    model = ScriptedChatModel([final("Death or imprisonment for life [1].")])
    numbered = [dataclasses.replace(e, number=n) for n, e in enumerate(EVIDENCE, start=1)]
    result = generate_draft(MURDER, numbered, model, fallback=lambda: FALLBACK_DRAFT)
    assert result.path == "llm"
    assert result.value.answer_text == "Death or imprisonment for life [1]."
    assert not result.value.extractive
    prompt = str(model.calls[0][-1].content)
    assert f"[1] {EVIDENCE[0].source_id} · " in prompt and prompt.rstrip().endswith(MURDER)
    assert model.call_tool_names == [[]]  # no tool schema: a plain-text answer is asked for


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"answer_text": "Death or imprisonment for life [1]."}\n```',
        '{"name": "final_answer", "arguments": {"answer_text": "Death or imprisonment for '
        'life [1]."}}',
        "Answer: Death or imprisonment for life [1].",
    ],
)
def test_generator_reads_answers_wrapped_in_json_fences_or_labels(reply: str) -> None:
    result = generate_draft(
        MURDER, EVIDENCE, ScriptedChatModel([final(reply)]), fallback=lambda: FALLBACK_DRAFT
    )
    assert result.value.answer_text == "Death or imprisonment for life [1]."


def test_generator_falls_back_on_an_empty_reply_or_a_model_error() -> None:
    def down(_messages: list[BaseMessage]) -> AIMessage:
        raise ConnectionError("model server unreachable")

    for model in (ScriptedChatModel([final("  ")]), ScriptedChatModel([down])):
        result = generate_draft(MURDER, EVIDENCE, model, fallback=lambda: FALLBACK_DRAFT)
        assert result.path == "fallback" and result.value == FALLBACK_DRAFT


# ---------------------------------------------------------------- structured bridge


def test_json_in_plain_content_is_accepted_leniently() -> None:
    reply = final(
        "Here is the verdict:\n```json\n{'verdict': 'SUFFICIENT', rationale: 'all there',}\n```"
    )
    result = call_structured(
        ScriptedChatModel([reply]),
        CragVerdict,
        [HumanMessage("judge")],
        fallback=lambda: CragVerdict(verdict="INSUFFICIENT", missing_information="x"),
    )
    assert result.path == "llm"
    assert result.value.verdict == "SUFFICIENT"


def test_broken_json_arguments_are_repaired_or_sent_back() -> None:
    model = ScriptedChatModel(
        [
            tool_call("plan", '["not", "an", "object"]'),
            tool_call("plan", '{"intent_class": "documentary", "primary_query": "murder"'),
        ]
    )
    result = call_structured(
        model, Plan, [HumanMessage("plan")], name="plan", fallback=lambda: heuristic_plan("q")
    )
    assert result.path == "llm_after_retry" and result.retries == 1
    assert result.value.primary_query == "murder"
    assert "not a valid JSON object" in result.errors[0]


def test_a_model_error_goes_to_the_fallback_without_retrying() -> None:
    def explode(_messages: list[BaseMessage]) -> AIMessage:
        raise ConnectionError("model server unreachable")

    model = ScriptedChatModel([explode], repeat_last=True)
    result = plan_question(MURDER, model)
    assert result.path == "fallback" and result.retries == 0
    assert "unreachable" in result.errors[0]
    assert len(model.calls) == 1
    assert result.value == heuristic_plan(MURDER)


# ---------------------------------------------------------------- heuristics


def test_heuristic_refinement_is_driven_by_the_gap_hint() -> None:
    refined = heuristic_refinement("What is the punishment for arson?", "arson", [])
    assert refined.refined_query == "punishment arson"  # key phrase + gap hint, words once
    # every candidate is a part of the search already run: nothing new (the runtime moves on)
    again = heuristic_refinement("What is the punishment for arson?", "arson", ["punishment arson"])
    assert not novel_query(again.refined_query, ["punishment arson"])


BARON = (
    "Name the father of Oswin Tarrant, 2nd Baron Hale, who was the son of Piers Lorne, 5th Earl "
    "of Marrow?"
)
FOLK = "Which Norwegian folk band from Bergen released an album of live tracks?"


@pytest.mark.parametrize(
    ("question", "gap", "expected", "novel"),
    [
        # the gap joins the name it is said of: a new, focused search
        (FOLK, "compilation album", "Bergen compilation album", True),
        ("Who founded the firm that makes the Vexa?", "the founder", "Vexa the founder", True),
        # every candidate is a bare word or a part of the first search: nothing new to find
        (FOLK, "live", "Bergen live", False),
        (BARON, "father", "Oswin Tarrant father", False),
        (
            "When was the Irish poet born whose second collection is Salt Rain?",
            "what's second collection poet",
            "Irish what's second collection poet",
            False,
        ),
    ],
)
def test_heuristic_refinement_never_issues_a_bare_word_or_a_part_of_a_query(
    question: str, gap: str, expected: str, novel: bool
) -> None:
    tried = [key_phrase(question)]  # the first search of a guided run
    query = heuristic_refinement(question, gap, tried).refined_query
    assert query == expected
    assert novel_query(query, tried) is novel


def test_heuristic_verdict_thresholds_and_missing_terms() -> None:
    assert heuristic_verdict(MURDER, EVIDENCE).verdict == "SUFFICIENT"
    partial = heuristic_verdict("What is the punishment for arson?", EVIDENCE)
    assert (partial.verdict, partial.missing_information) == ("PARTIAL", "arson")
    none = heuristic_verdict("What is the capital of France?", EVIDENCE)
    assert none.verdict == "INSUFFICIENT" and none.missing_information == "capital france"
    assert heuristic_verdict(MURDER, []).verdict == "INSUFFICIENT"


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (MURDER, []),
        (TWO_PART, ["What is the punishment for murder?", "What is theft?"]),
        ("What is murder? What is theft?", ["What is murder?", "What is theft?"]),
        # a word and a comma that link a question to the one before are no part of it
        ("What is murder? Also, what is theft?", ["What is murder?", "What is theft?"]),
        (
            "What is the difference between murder and culpable homicide?",
            ["What is murder?", "What is culpable homicide?"],
        ),
        (
            "What is the punishment for extortion and criminal trespass?",
            [
                "What is the punishment for extortion?",
                "What is the punishment for criminal trespass?",
            ],
        ),
        ("What are the rights and duties of a citizen?", []),
        ("Explain section 101 on murder and punishment in simple terms", []),
    ],
)
def test_heuristic_decomposition(question: str, parts: list[str]) -> None:
    assert is_multi_part(question) is bool(parts)
    assert heuristic_decomposition(question).sub_questions == parts


def test_heuristic_router_is_deterministic() -> None:
    named = heuristic_route("What does section 103 of the Act say?")
    assert (named.retrieval_profile, named.graph_hint, named.granularity) == (
        "precise",
        True,
        "section",
    )
    assert named.normalized_query == "What does section 103 of the Act say?"
    plain = heuristic_route(MURDER)
    assert (plain.retrieval_profile, plain.graph_hint, plain.normalized_query) == (
        "balanced",
        False,
        "punishment murder",
    )
    assert heuristic_route("Give an overview of the chapters").granularity == "document"


def test_heuristic_compression_keeps_question_sentences_within_budget() -> None:
    q_terms = set(terms(MURDER))
    out = heuristic_compression(q_terms, EVIDENCE, 40)
    text = " ".join(p.text for p in out.passages)
    assert approx_tokens(text) <= 40
    assert [p.source_id for p in out.passages] == ["BNS_S103"]
    for sentence in sentences(text):
        assert q_terms & set(terms(sentence))


# ---------------------------------------------------------------- runtime, offline


def test_heuristic_guided_run_answers_murder_with_citation(app: Sleuth) -> None:
    result, events, ctx = run_guided(app, MURDER)
    assert result.status == RunStatus.COMPLETED
    assert result.answer.citations[0].source_id == "BNS_S103"
    assert "death or imprisonment for life" in result.answer.answer_text
    trace = result.trace
    assert set(trace) >= TRACE_KEYS
    assert trace["planner_runtime"] == "heuristic"
    assert re.fullmatch(r"[0-9a-f]{32}", trace["planner_run_id"])
    assert trace["planner_path"][:3] == ["route", "plan", "decide"]
    assert trace["planner_path"][-2:] == ["generate", "finalize"]
    assert {"retrieve", "evaluate", "enrich"} <= set(trace["planner_path"])
    assert set(trace["agentic"]) >= {"crag", "complementary", "compression", "decomposition"}
    assert trace["agentic"]["crag"][0]["verdict"] == "SUFFICIENT"
    assert set(trace["agentic"]["crag"][0]) >= {"round", "verdict", "missing_information", "query"}
    assert set(trace["agentic"]["compression"]) >= {"applied", "tokens_before", "tokens_after"}
    assert trace["output_validation_retries"] == {"planner": 0, "crag_evaluator": 0}
    for call in trace["tool_trace"]:
        assert set(call) == {"tool", "arguments", "ok", "status", "duration_ms"}
    tools = [c["tool"] for c in trace["tool_trace"]]
    assert tools[0] == "rag_search" and "read_section" in tools
    assert trace["timings_ms"]["total"] > 0 and "retrieve" in trace["timings_ms"]
    assert set(trace["retrieved_source_ids"]) == set(ctx.retrieved)
    assert any(t.startswith("CRAG verdict: SUFFICIENT") for t in thoughts(events))


def test_events_have_increasing_seq_and_the_right_order(app: Sleuth) -> None:
    result, events, _ = run_guided(app, MURDER)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.task_id for e in events} == {"task-1"}
    types = [e.type for e in events]
    assert types[0] == "observe"
    assert types[1:3] == ["think", "think"]  # route, then plan
    assert types.index("think") < types.index("tool_call")
    assert types[-1] == "answer" and types.count("answer") == 1
    calls = [e for e in events if e.type == "tool_call"]
    assert len(calls) == len(result.tool_calls)
    for i, event in enumerate(events):  # every tool_call is answered by its tool_result
        if event.type == "tool_call":
            assert events[i + 1].type == "tool_result"
            assert events[i + 1].call_id == event.call_id
    crag = next(i for i, t in enumerate(types) if t == "think" and "CRAG" in events[i].content)
    assert types.index("tool_result") < crag  # judged after retrieving
    steps = [s.step_type for s in result.steps]
    assert steps[0] == "observe" and steps[-1] == "final" and steps.count("final") == 1


def test_offline_refinement_uses_the_gap_hint(app: Sleuth) -> None:
    result, events, _ = run_guided(app, "What is the punishment for arson?", max_refinements=1)
    crag = result.trace["agentic"]["crag"]
    assert crag[0]["verdict"] == "PARTIAL" and crag[0]["missing_information"] == "arson"
    # the gap hint is a word of the search already run: the refinement pairs it with what
    # the best section found is about (a new search), never the same words again
    assert searches(result) == ["punishment arson", "Section 103. Punishment for murder. arson"]
    assert len(crag) == 2  # max_refinements=1: one refinement, then move on
    # "punishment" alone is not enough: the murder sections must not answer for arson
    assert result.answer.is_insufficient_context and result.answer.citations == []
    assert any("CRAG verdict: PARTIAL — missing: arson" in t for t in thoughts(events))


def test_offline_unanswerable_question_is_insufficient_context(app: Sleuth) -> None:
    result, _, _ = run_guided(app, "What is the capital of France?")
    assert result.status == RunStatus.INSUFFICIENT_CONTEXT
    assert result.answer.is_insufficient_context and result.answer.citations == []
    assert len(result.trace["agentic"]["crag"]) == 3  # 1 + max_refinements rounds
    assert "read_section" not in [c["tool"] for c in result.tool_calls]


def test_offline_decomposition_retrieves_each_sub_question(app: Sleuth) -> None:
    result, events, _ = run_guided(app, TWO_PART)
    decomposition = result.trace["agentic"]["decomposition"]
    assert decomposition["applied"] is True
    assert decomposition["sub_questions"] == [
        "What is the punishment for murder?",
        "What is theft?",
    ]
    assert searches(result)[:2] == ["punishment murder", "theft"]
    questions = [c["question"] for c in result.trace["agentic"]["crag"]]
    assert questions == decomposition["sub_questions"]
    assert result.status == RunStatus.COMPLETED
    cited = {c.source_id for c in result.answer.citations}
    assert {"BNS_S103", "BNS_S303"} <= cited  # the synthesis cites across sub-questions
    assert any(t.startswith("Decomposition: 2 sub-questions") for t in thoughts(events))


def test_graph_hint_follows_references_of_the_top_sections(app: Sleuth) -> None:
    result, _, _ = run_guided(app, "What does section 103 say about murder?")
    tools = [(c["tool"], c["arguments"]) for c in result.tool_calls]
    assert ("follow_references", {"source_id": "BNS_S103"}) in tools
    assert result.answer.citations[0].source_id == "BNS_S103"


def test_compression_applies_over_the_token_budget(app: Sleuth) -> None:
    result, events, _ = run_guided(app, MURDER, token_budget=60)
    compression = result.trace["agentic"]["compression"]
    assert compression["applied"] is True
    assert compression["tokens_after"] < compression["tokens_before"]
    assert compression["tokens_after"] <= 60
    assert "compress" in result.trace["planner_path"]
    assert any(t.startswith("Compression:") for t in thoughts(events))
    assert result.answer.citations[0].source_id == "BNS_S103"


def test_past_deadline_ends_with_timeout_and_an_answer(app: Sleuth) -> None:
    result, events, _ = run_guided(app, MURDER, deadline=time.monotonic() - 1)
    assert result.status == RunStatus.TIMEOUT
    assert result.answer.answer_text
    assert [e.type for e in events].count("answer") == 1


def test_a_failing_graph_still_ends_with_one_answer(
    app: Sleuth, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sleuth.agents.guided import runtime

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("validator crashed")

    monkeypatch.setattr(runtime, "finish_answer", broken)
    result, events, _ = run_guided(app, MURDER)
    assert result.status == RunStatus.ERROR
    assert result.error == "RuntimeError: validator crashed"
    assert [e.type for e in events].count("answer") == 1


# ---------------------------------------------------------------- runtime, scripted LLM

INTENT = {
    "retrieval_profile": "balanced",
    "normalized_query": "punishment murder",
    "graph_hint": False,
    "granularity": "passage",
    "confidence": 0.9,
}
PLAN = {"intent_class": "documentary", "primary_query": "murder punishment"}


WORDS = ["life", "fine", "death", "group", "attempt"]


@pytest.mark.parametrize("max_refinements", [0, 2])
def test_crag_loop_stops_at_max_refinements_with_a_final_answer(
    app: Sleuth, max_refinements: int
) -> None:
    script = AgentScript(
        intent_parse=[INTENT],
        plan=[PLAN],
        crag_verdict=[{"verdict": "INSUFFICIENT", "missing_information": "sentencing rules"}],
        refine_query=[{"refined_query": f"sentencing rules murder {w}"} for w in WORDS],
        final_answer=[{"answer_text": "should not be used", "citations": []}],
    )
    result, events, _ = run_guided(app, MURDER, script.model, max_refinements=max_refinements)
    crag = result.trace["agentic"]["crag"]
    assert len(crag) == max_refinements + 1
    assert all(c["verdict"] == "INSUFFICIENT" for c in crag)
    assert searches(result) == ["murder punishment"] + [
        f"sentencing rules murder {w}" for w in WORDS[:max_refinements]
    ]
    assert [c["query"] for c in crag] == searches(result)
    assert result.trace["refinements"] == max_refinements
    assert result.status == RunStatus.INSUFFICIENT_CONTEXT
    assert result.answer.is_insufficient_context and "sentencing rules" in result.answer.answer_text
    assert [e.type for e in events].count("answer") == 1
    assert "final_answer" not in script.seen  # an INSUFFICIENT verdict skips generation
    # the gap hint reached the refinement agent
    for messages in script.seen["refine_query"]:
        assert "Missing information: sentencing rules" in str(messages[1].content)
    assert result.trace["planner_runtime"] == "llm"


def test_llm_run_with_retries_complementary_queries_and_generation(app: Sleuth) -> None:
    script = AgentScript(
        intent_parse=[INTENT],
        plan=[
            {"intent_class": "documentary", "primary_query": ""},  # invalid: blank query
            {**PLAN, "complementary_queries": ["culpable homicide death"]},
        ],
        crag_verdict=[{"verdict": "SUFFICIENT", "rationale": "S103 states the punishment"}],
        final_answer=[
            {"answer_text": "Death [XYZ_S9].", "citations": ["XYZ_S9"]},  # not in the evidence
            {
                "answer_text": "Murder is punished with death or imprisonment for life [BNS_S103].",
                "key_points": ["death or life imprisonment"],
                "citations": ["BNS_S103"],
            },
        ],
    )
    result, _, _ = run_guided(app, MURDER, script.model)
    assert result.status == RunStatus.COMPLETED
    assert [c.source_id for c in result.answer.citations] == ["BNS_S103"]
    assert searches(result) == ["murder punishment", "culpable homicide death"]
    assert result.trace["agentic"]["complementary"] == ["culpable homicide death"]
    assert result.trace["output_validation_retries"] == {
        "intent_parser": 0,
        "planner": 1,
        "crag_evaluator": 0,
        "generator": 0,
    }
    assert result.trace["route"]["source"] == "intent_parser"
    # the draft's only citation named nothing retrieved: one repair round told the model
    assert (result.trace["answer_source"], result.trace["repair_rounds"]) == ("repaired", 1)
    retry = script.seen["final_answer"][1]
    assert "cites none of the numbered results" in str(retry[-1].content)


def test_llm_decomposition_retrieves_each_sub_question_and_cites_across(app: Sleuth) -> None:
    subs = ["What is the punishment for murder?", "What is theft?"]
    script = AgentScript(
        intent_parse=[INTENT],
        plan=[{**PLAN, "is_multi_part": True}],
        decompose=[{"sub_questions": subs, "synthesis_hint": "answer both"}],
        crag_verdict=[{"verdict": "SUFFICIENT"}],
        final_answer=[
            {
                "answer_text": "Murder: death or life imprisonment [BNS_S103]. Theft is taking "
                "movable property dishonestly [BNS_S303].",
                "citations": ["BNS_S103", "BNS_S303"],
            }
        ],
    )
    result, _, _ = run_guided(app, TWO_PART, script.model)
    assert searches(result)[:2] == ["punishment murder", "theft"]
    assert [c["question"] for c in result.trace["agentic"]["crag"]] == subs
    assert [c.source_id for c in result.answer.citations] == ["BNS_S103", "BNS_S303"]
    prompt = str(script.seen["final_answer"][0][1].content)
    assert "What is theft?" in prompt and "BNS_S303 · " in prompt and "BNS_S103 · " in prompt


def test_route_and_plan_run_concurrently(app: Sleuth) -> None:
    started = {"intent": threading.Event(), "plan": threading.Event()}
    overlapped: dict[str, bool] = {}

    def waiting(me: str, other: str, reply: dict[str, Any]) -> Callable[..., AIMessage]:
        def respond(_messages: list[BaseMessage]) -> AIMessage:
            started[me].set()
            overlapped[me] = started[other].wait(timeout=5)
            return tool_call("intent_parse" if me == "intent" else "plan", reply)

        return respond

    script = AgentScript(
        intent_parse=[waiting("intent", "plan", INTENT)],
        plan=[waiting("plan", "intent", PLAN)],
        crag_verdict=[{"verdict": "SUFFICIENT"}],
        final_answer=[{"answer_text": "Death [BNS_S103].", "citations": ["BNS_S103"]}],
    )
    result, _, _ = run_guided(app, MURDER, script.model)
    assert overlapped == {"intent": True, "plan": True}
    assert result.status == RunStatus.COMPLETED


@pytest.mark.parametrize(
    ("plan", "status", "insufficient"),
    [
        (
            {
                "intent_class": "documentary",
                "skip_retrieval": "clarify",
                "clarification": "Which Act do you mean?",
                "primary_query": "act",
            },
            RunStatus.INSUFFICIENT_CONTEXT,
            True,
        ),
        (
            {"intent_class": "documentary", "skip_retrieval": "hard_block", "primary_query": "x"},
            RunStatus.INSUFFICIENT_CONTEXT,
            True,
        ),
        (
            {"intent_class": "conversational", "skip_retrieval": "llm_only", "primary_query": "hi"},
            RunStatus.COMPLETED,
            False,
        ),
    ],
)
def test_skip_paths_answer_without_retrieval(
    app: Sleuth, plan: dict[str, Any], status: RunStatus, insufficient: bool
) -> None:
    script = AgentScript(
        intent_parse=[INTENT], plan=[plan], direct=["Hello! Ask me about the statutes."]
    )
    result, events, _ = run_guided(app, "Hello there", script.model)
    assert result.tool_calls == []
    assert result.status == status
    assert result.answer.is_insufficient_context is insufficient
    assert result.answer.citations == []
    assert "skip" in result.trace["planner_path"]
    if plan["skip_retrieval"] == "clarify":
        assert result.answer.answer_text == "Which Act do you mean?"
    if plan["skip_retrieval"] == "llm_only":
        assert result.answer.answer_text == "Hello! Ask me about the statutes."
    assert [e.type for e in events].count("answer") == 1


def test_a_direct_reply_made_of_content_parts_shows_only_its_text(app: Sleuth) -> None:
    parts = [
        {"type": "thinking", "thinking": "A greeting; no search needed."},
        {"type": "text", "text": "Hello! "},
        {},
        {"type": "text", "text": "Ask me about the statutes."},
    ]
    plan = {"intent_class": "conversational", "skip_retrieval": "llm_only", "primary_query": "hi"}
    script = AgentScript(intent_parse=[INTENT], plan=[plan], direct=[AIMessage(content=parts)])
    result, _, _ = run_guided(app, "Hello there", script.model)
    assert result.answer.answer_text == "Hello! Ask me about the statutes."


def test_are_x_and_y_both_questions_split_into_well_formed_parts() -> None:
    from sleuth.agents.question import split_question

    parts, _ = split_question("Are Wendell Orr and Priya Manek both film directors?")
    assert parts == [
        "Are Wendell Orr film directors?",
        "Are Priya Manek film directors?",
    ]
    assert is_multi_part("Were Oberon and Titania both moons of Uranus?")


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "What is dowry death and how is it punished?",
            ["What is dowry death?", "How is dowry death punished?"],
        ),
        (
            "What is theft and what is its punishment?",
            ["What is theft?", "What is the punishment of theft?"],
        ),
        ("What is bail? Who grants it?", ["What is bail?", "Who grants bail?"]),
        # "they" may be another noun of the first part: left as written
        (
            "What are the powers of the police and when can they arrest without a warrant?",
            ["What are the powers of the police?", "When can they arrest without a warrant?"],
        ),
    ],
)
def test_sub_questions_keep_their_subject(question: str, parts: list[str]) -> None:
    assert split_question(question)[0] == parts


# ---------------------------------------------------------------- coverage: words vs meaning


class KeywordScorer:
    """A cross-encoder double: logit +4 for a passage holding ``word``, else -8."""

    def __init__(self, word: str) -> None:
        self.word = word

    def logits(self, query: str, passages: list[str]) -> list[float]:
        return [4.0 if self.word in p.lower() else -8.0 for p in passages]


# written for this test: it shares almost no word with the murder sections that answer it
PARAPHRASED = "What happens to somebody who deliberately kills another human being?"


@pytest.mark.parametrize(("word", "reads"), [("murder", True), ("zebra", False)])
def test_a_word_coverage_decline_is_checked_by_the_cross_encoder(
    app: Sleuth, word: str, reads: bool
) -> None:
    from sleuth.agents.support import SupportChecker

    assert heuristic_verdict(PARAPHRASED, EVIDENCE).verdict == "INSUFFICIENT"
    script = AgentScript(final_answer=["Death or imprisonment for life [BNS_S103]."])
    checker = SupportChecker(cross_encoder=KeywordScorer(word), coverage_threshold=0.007)  # type: ignore[arg-type]
    result, events, _ = run_guided(
        app, PARAPHRASED, script.model, llm_agents="auto", checker=checker, max_refinements=0
    )
    assert bool(script.seen["final_answer"]) is reads
    assert result.answer.is_insufficient_context is not reads
    said = " ".join(thoughts(events))
    assert ("the model reads the evidence" in said) is reads


class ConstantJudge:
    """A model double for the coverage judge: the same log-odds of "Yes" for every prompt."""

    def __init__(self, log_odds: float) -> None:
        self.log_odds = log_odds
        self.shown: list[str] = []

    def first_token_log_odds(self, messages: list[Any], yes: str, no: str) -> tuple[float, dict]:
        self.shown.append(str(messages[-1].content))
        return self.log_odds, {"input_tokens": 80}


@pytest.mark.parametrize(("log_odds", "reads"), [(2.0, True), (-1.5, False)])
def test_where_the_cross_encoder_finds_nothing_the_model_judges_coverage(
    app: Sleuth, log_odds: float, reads: bool
) -> None:
    """The cross-encoder scores every passage low (a plainly worded question): the model is
    asked whether the first sections deal with the question; when it finds one that does, it
    reads the evidence and its answer stands, else the run declines with both scores."""
    from sleuth.agents.coverage import CoverageJudge
    from sleuth.agents.support import SupportChecker

    script = AgentScript(final_answer=["Death or imprisonment for life [BNS_S103]."])
    judge = ConstantJudge(log_odds)
    checker = SupportChecker(
        cross_encoder=KeywordScorer("zebra"),  # type: ignore[arg-type]
        coverage_threshold=0.007,
        coverage_judge=CoverageJudge(judge),  # type: ignore[arg-type]
    )
    result, events, _ = run_guided(
        app, PARAPHRASED, script.model, llm_agents="auto", checker=checker, max_refinements=0
    )
    assert judge.shown and PARAPHRASED in judge.shown[0]
    assert bool(script.seen["final_answer"]) is reads
    assert result.answer.is_insufficient_context is not reads
    said = " ".join(thoughts(events))
    assert ("but the model judges a section" in said) is reads
    if reads:
        assert [c.source_id for c in result.answer.citations][:1] == ["BNS_S103"]


def test_without_a_model_a_cross_encoder_answers_with_the_sentences_it_scores_best(
    app: Sleuth,
) -> None:
    from sleuth.agents.support import SupportChecker

    checker = SupportChecker(cross_encoder=KeywordScorer("murder"), coverage_threshold=0.007)  # type: ignore[arg-type]
    result, events, _ = run_guided(
        app, PARAPHRASED, None, llm_agents="auto", checker=checker, max_refinements=0
    )
    answer = result.answer
    assert not answer.is_insufficient_context
    assert "murder" in answer.answer_text.lower()
    assert {c.source_id for c in answer.citations} <= {"BNS_S101", "BNS_S103"}
    assert "answering from the evidence" in " ".join(thoughts(events))
    # no sentence the cross-encoder finds relevant: the word-coverage decline stands
    checker = SupportChecker(cross_encoder=KeywordScorer("zebra"), coverage_threshold=0.007)  # type: ignore[arg-type]
    result, _, _ = run_guided(
        app, PARAPHRASED, None, llm_agents="auto", checker=checker, max_refinements=0
    )
    assert result.answer.is_insufficient_context
    # the words match but no sentence answers (the cross-encoder says so): declined, not
    # answered from word overlap
    assert heuristic_verdict("What is the punishment for murder?", EVIDENCE).verdict != (
        "INSUFFICIENT"
    )
    result, _, _ = run_guided(
        app,
        "What is the punishment for murder?",
        None,
        llm_agents="auto",
        checker=checker,
        max_refinements=0,
    )
    assert result.answer.is_insufficient_context


class MurderFirstScorer:
    """A cross-encoder double that prefers murder: a murder passage scores +4 for a question
    about murder; a theft passage +2 for a question about theft alone, −6 beside murder."""

    def logits(self, query: str, passages: list[str]) -> list[float]:
        q = query.lower()
        out = []
        for p in passages:
            if "murder" in p.lower() and "murder" in q:
                out.append(4.0)
            elif "theft" in p.lower() and "theft" in q:
                out.append(-6.0 if "murder" in q else 2.0)
            else:
                out.append(-8.0)
        return out


def test_without_a_model_each_part_of_a_question_is_quoted(app: Sleuth) -> None:
    """Scored against the whole question, the murder sentences fill every quote; each part
    is quoted from its own best sentence, so the theft part is answered too."""
    from sleuth.agents.support import SupportChecker

    checker = SupportChecker(cross_encoder=MurderFirstScorer(), coverage_threshold=0.007)  # type: ignore[arg-type]
    question = "What is the punishment for murder? Also, what is the punishment for theft?"
    result, _, _ = run_guided(app, question, None, llm_agents="auto", checker=checker)
    cited = [c.source_id for c in result.answer.citations]
    assert "BNS_S303" in cited and any(sid in cited for sid in ("BNS_S101", "BNS_S103"))
    assert "commits theft" in result.answer.answer_text


def test_a_decline_lists_only_the_gaps_the_evaluator_named() -> None:
    from types import SimpleNamespace

    from sleuth.agents.guided.runtime import _insufficient
    from sleuth.agents.guided.schemas import CragVerdict

    rt = SimpleNamespace(ranked=lambda question: ["HC_S1", "HC_S2"])
    named = CragVerdict(verdict="INSUFFICIENT", missing_information="the fee", reasoning="")
    blank = CragVerdict(verdict="SUFFICIENT", missing_information=" ", reasoning="")
    state = SimpleNamespace(question="What is the fee?", verdicts=[blank, named, None])
    text = _insufficient(rt, state).answer_text  # type: ignore[arg-type]
    assert "(missing: the fee)" in text and "HC_S1, HC_S2" in text
    state.verdicts = [blank]
    assert "missing" not in _insufficient(rt, state).answer_text  # type: ignore[arg-type]
    # nothing retrieved at all: said so, not "the closest found (none) do not cover it"
    rt = SimpleNamespace(ranked=lambda question: [])
    text = _insufficient(rt, state).answer_text  # type: ignore[arg-type]
    assert text.endswith("; nothing was retrieved.") and "closest" not in text


def test_sub_questions_of_a_question_with_a_preamble_keep_its_context(app: Sleuth) -> None:
    """A scenario told first, then two asks: each part is searched with the scenario (a bare
    "what is the fine?" finds nothing of the offence the scenario describes)."""
    question = (
        "My neighbour killed a man during a quarrel last night. What is the punishment he "
        "faces, and can the court also fine him?"
    )
    result, _, _ = run_guided(app, question)
    decomposition = result.trace["agentic"]["decomposition"]
    assert decomposition["applied"] is True
    scenario = "My neighbour killed a man during a quarrel last night."
    assert all(q.startswith(scenario) for q in decomposition["sub_questions"])
    assert all("killed" in query for query in searches(result)[:2])
    assert result.trace["retrieved_source_ids"][0] == "BNS_S103"


class GradedScorer:
    """A cross-encoder double: logit ``answering`` for a passage holding ``word``, else -8."""

    def __init__(self, word: str, answering: float) -> None:
        self.word, self.answering = word, answering

    def logits(self, query: str, passages: list[str]) -> list[float]:
        return [self.answering if self.word in p.lower() else -8.0 for p in passages]


@pytest.mark.parametrize(("logit", "overruled"), [(4.0, True), (-2.0, False)])
def test_a_models_own_decline_is_overruled_only_by_sentences_that_answer(
    app: Sleuth, logit: float, overruled: bool
) -> None:
    """The model declines evidence that answers: the quotes ship when a sentence reaches
    the no-model boundary (0.5: logit 4 → 0.98), not when it only clears the coverage
    threshold (logit -2 → 0.12 ≥ 0.007)."""
    from sleuth.agents.finish import OVERRULED
    from sleuth.agents.support import SupportChecker

    script = AgentScript(final_answer=["Insufficient context: the question does not say who."])
    checker = SupportChecker(cross_encoder=GradedScorer("murder", logit), coverage_threshold=0.007)  # type: ignore[arg-type]
    result, _, _ = run_guided(
        app, "What is the punishment for murder?", script.model, llm_agents="auto", checker=checker
    )
    assert script.seen["final_answer"]  # the model read the evidence and declined
    assert result.answer.is_insufficient_context is not overruled
    replaced = result.trace.get("answer_replaced")
    assert (replaced == OVERRULED) is overruled
    if overruled:
        assert "BNS_S103" in {c.source_id for c in result.answer.citations}


# ---------------------------------------------------------------- a question naming a section


@pytest.mark.parametrize(
    "question",
    [
        "What does section 303 of the Test Act say?",
        "Explain section 303 of the Test Act in simple terms.",
    ],
)
def test_a_question_naming_a_section_is_answered_from_that_section(
    app: Sleuth, question: str
) -> None:
    """The question's words ("section", the act's name, "in simple terms") are not what the
    named section says, and a cross-encoder finds the murder sections more relevant to
    them (every murder sentence scores high here): the answer still quotes and cites the
    section the question names, and only it."""
    from sleuth.agents.support import SupportChecker

    checker = SupportChecker(cross_encoder=KeywordScorer("murder"), coverage_threshold=0.007)  # type: ignore[arg-type]
    result, _, ctx = run_guided(app, question, None, llm_agents="auto", checker=checker)
    assert {"BNS_S303", "BNS_S103"} <= set(ctx.retrieved)  # the murder sections were read too
    assert [c.source_id for c in result.answer.citations] == ["BNS_S303"]
    assert "intending to take dishonestly any movable property" in result.answer.answer_text


def test_the_generator_reads_only_sections_that_bear_on_the_question(app: Sleuth) -> None:
    """Retrieved sections whose every passage the cross-encoder scores below the coverage
    threshold (and that no bearing section links to) are not put in the generator's prompt;
    the trace names them."""
    from sleuth.agents.support import SupportChecker

    script = AgentScript(final_answer=["Death or imprisonment for life [BNS_S103]."])
    checker = SupportChecker(cross_encoder=KeywordScorer("murder"), coverage_threshold=0.007)  # type: ignore[arg-type]
    result, events, ctx = run_guided(
        app,
        "What is the punishment for murder?",
        script.model,
        llm_agents="auto",
        checker=checker,
        scorer=checker.cross_encoder,
    )
    prompt = str(script.seen["final_answer"][-1][-1].content)
    read = {sid for sid in ctx.retrieved if f"[{ctx.numbers[sid]}]" in prompt}
    # the murder sections, and culpable homicide, which the murder section cites
    assert read == {"BNS_S103", "BNS_S101", "BNS_S100"}
    assert "BNS_S303" in ctx.retrieved  # theft was retrieved, and set aside
    assert "BNS_S303 set aside" in " ".join(thoughts(events))
    assert not result.answer.is_insufficient_context


class LowScorer:
    """A cross-encoder double unsure of everything: logit −4 (probability 0.018, above the
    coverage threshold, below the cross-encoder's 0.5) for passages holding ``word``, −8
    (below the coverage threshold) for the others."""

    def __init__(self, word: str) -> None:
        self.word = word

    def logits(self, query: str, passages: list[str]) -> list[float]:
        return [-4.0 if self.word in p.lower() else -8.0 for p in passages]


class TitleJudge:
    """A coverage-judge model double: log-odds of "Yes" 3 for the section whose title holds
    ``title``, −1 for any other; the excerpts it was shown."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.shown: list[str] = []

    def first_token_log_odds(self, messages: list[Any], yes: str, no: str) -> tuple[float, dict]:
        text = str(messages[-1].content)
        self.shown.append(text)
        return (3.0 if self.title in text.split("\n", 1)[0] else -1.0), {"input_tokens": 60}


@pytest.mark.parametrize(
    ("scorer", "judged", "reads"),
    [
        (LowScorer("culpable"), True, True),  # the cross-encoder unsure: the model is asked
        (LowScorer("culpable"), False, False),  # no model judgement: the section stays aside
        (KeywordScorer("murder"), True, False),  # the cross-encoder sure of other sections
    ],
)
def test_a_section_the_cross_encoder_sets_aside_is_read_when_the_model_judges_it_relevant(
    app: Sleuth, scorer: Any, judged: bool, reads: bool
) -> None:
    """The theft section scores below the coverage threshold, so it would be set aside; when
    no section kept scores at the cross-encoder's own boundary, the model is asked which of
    those set aside deals with the question, and the one it finds is read."""
    from sleuth.agents.coverage import CoverageJudge
    from sleuth.agents.support import SupportChecker

    script = AgentScript(final_answer=["Death or imprisonment for life [BNS_S103]."])
    judge = TitleJudge("Theft")
    checker = SupportChecker(
        cross_encoder=scorer,
        coverage_threshold=0.007,
        coverage_judge=CoverageJudge(judge) if judged else None,  # type: ignore[arg-type]
    )
    _, events, ctx = run_guided(
        app,
        PARAPHRASED,
        script.model,
        llm_agents="auto",
        checker=checker,
        scorer=scorer,
        max_refinements=0,
    )
    assert "BNS_S303" in ctx.retrieved
    prompt = str(script.seen["final_answer"][-1][-1].content)
    assert ("BNS_S303 · " in prompt) is reads
    said = " ".join(thoughts(events))
    assert ("BNS_S303 read although the cross-encoder found it unrelated" in said) is reads
    assert ("BNS_S303 set aside" in said) is not reads
    if isinstance(scorer, KeywordScorer):
        assert not any("Section: Theft" in shown for shown in judge.shown)
