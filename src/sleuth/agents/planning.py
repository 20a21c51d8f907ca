"""The ReAct mode's planning agent: a plan of steps before acting, re-planned on contradiction.

Plan-and-act in the manner of Wang et al. 2023 ("Plan-and-Solve Prompting", arXiv:2305.04091)
and of ReWOO / LLMCompiler-style planners: before the first action the planner writes a
short list of typed steps (search, read, follow references, answer); the reasoner follows it
(the heuristic reasoner executes its searches and reads, an LLM gets it in its prompt); after
each tool round the observation is checked against the step it served, and a contradiction
(a search that finds nothing related, a section that does not exist, a tool that fails)
triggers one re-plan.

With a model the plan is a structured output (:class:`ReactPlan`, validated, retried, then
the heuristic plan as fallback); without one the heuristic plan is used directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, field_validator, model_validator

from sleuth.agents.question import missing_words, split_question
from sleuth.agents.structured import StructuredResult, call_structured
from sleuth.ingest.references import extract_references
from sleuth.prompts import load_prompt
from sleuth.retrieval.text import key_phrase, novel_query, terms
from sleuth.tools.base import RunContext, ToolResult

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

MAX_PLAN_STEPS = 8
MAX_REPLANS = 2
"""Re-plans allowed per run (each one after a contradicting observation)."""
MAX_MEMORY_READS = 2
"""Sections cited by a similar past run that the plan re-reads first."""

StepAction = Literal["search", "read", "follow_references", "answer"]
ACTION_ALIASES = {
    "rag_search": "search",
    "read_section": "read",
    "outline": "read",
    "follow": "follow_references",
    "final_answer": "answer",
}
"""Tool names a model writes as plan actions, read as the step they stand for."""


class PlanStep(BaseModel):
    """One step of a plan."""

    action: StepAction = Field(description="search | read | follow_references | answer")
    target: str = Field(
        default="",
        description="search: the query; read / follow_references: a source_id, or empty for "
        "'the best sections found so far'; answer: empty",
    )
    purpose: str = Field(default="", description="What this step should establish")

    @field_validator("action", mode="before")
    @classmethod
    def _alias(cls, value: object) -> object:
        if isinstance(value, str):
            key = value.strip().lower()
            return ACTION_ALIASES.get(key, key)
        return value

    @field_validator("target", "purpose")
    @classmethod
    def _strip(cls, value: str) -> str:
        return " ".join(value.split())

    @model_validator(mode="after")
    def _no_invented_targets(self) -> PlanStep:
        # a section is named by its source_id (one token); a URL or a phrase is a guess:
        # the step then means "the best sections found"
        if self.action in ("read", "follow_references") and (
            "://" in self.target or len(self.target.split()) > 1
        ):
            self.target = ""
        return self

    def describe(self) -> str:
        """``search 'X' — purpose`` style text for the trace."""
        what = {
            "search": f"search '{self.target}'",
            "read": f"read {self.target or 'the best sections'}",
            "follow_references": f"follow the cross-references of {self.target or 'them'}",
            "answer": "check the evidence covers the question and answer with citations",
        }[self.action]
        return f"{what} — {self.purpose}" if self.purpose else what


class ReactPlan(BaseModel):
    """A plan for one question: ordered steps ending with ``answer``."""

    steps: list[PlanStep] = Field(min_length=1, max_length=MAX_PLAN_STEPS)
    rationale: str = Field(default="", description="Why this plan, in one sentence")

    @field_validator("steps")
    @classmethod
    def _needs_a_search(cls, steps: list[PlanStep]) -> list[PlanStep]:
        if not any(s.action == "search" and s.target for s in steps):
            raise ValueError("the plan needs at least one search step with a query")
        if steps[-1].action != "answer":
            steps = [*steps, PlanStep(action="answer")]
        return steps[:MAX_PLAN_STEPS]

    def render(self) -> str:
        """``1) … 2) …`` on one line."""
        return " ".join(f"{i}) {s.describe()};" for i, s in enumerate(self.steps, 1)).rstrip(";")

    def searches(self) -> list[str]:
        return [s.target for s in self.steps if s.action == "search" and s.target]

    def reads(self) -> list[str]:
        return [s.target for s in self.steps if s.action == "read" and s.target]


def heuristic_react_plan(question: str, recalled: Sequence[Sequence[str]] = ()) -> ReactPlan:
    """The deterministic plan.

    One search per part of a multi-part question (:func:`split_question`), else one search
    for the key phrase (the question as written when it names a section); the sections cited
    by the most similar past run of this user (``recalled``: their source_ids, best first)
    are re-read first; then read the best sections, follow their references, answer.
    """
    parts, _ = split_question(question)
    if len(parts) >= 2:
        steps = [
            PlanStep(action="search", target=key_phrase(p), purpose=f"evidence for: {p}")
            for p in parts[:3]
        ]
    else:
        query = question.strip() if extract_references(question) else key_phrase(question)
        steps = [PlanStep(action="search", target=query, purpose="find the relevant sections")]
    remembered = list(dict.fromkeys(s for run in recalled[:1] for s in run))[:MAX_MEMORY_READS]
    steps[:0] = [
        PlanStep(action="read", target=sid, purpose="cited by a similar earlier question")
        for sid in remembered
    ]
    steps += [
        PlanStep(action="read", purpose="read the best sections in full"),
        PlanStep(action="follow_references", purpose="check the sections they cite"),
        PlanStep(action="answer"),
    ]
    rationale = (
        f"the question has {len(parts)} parts; each is searched on its own"
        if len(parts) >= 2
        else "one search for the question's key terms, then read and verify"
    )
    return ReactPlan(steps=steps[:MAX_PLAN_STEPS], rationale=rationale)


def contradiction(
    question: str, calls: Sequence[tuple[str, dict, ToolResult]], plan: ReactPlan
) -> str | None:
    """Whether a tool round contradicts the plan; the reason in words, else ``None``.

    Contradictions: a planned search that failed or found no section sharing a term with its
    query; a planned read of a section that does not exist; any failed planned step.
    """
    planned_searches = {" ".join(q.lower().split()) for q in plan.searches()}
    planned_reads = set(plan.reads())
    for name, args, result in calls:
        if name == "rag_search":
            query = str(args.get("query", ""))
            if " ".join(query.lower().split()) not in planned_searches:
                continue
            if not result.ok:
                return f"the planned search '{query}' failed ({result.status})"
            q_terms = set(terms(query))
            related = [
                r
                for r in result.payload.get("results", [])
                if q_terms & set(terms(f"{r.get('title', '')} {r.get('snippet', '')}"))
            ]
            if not related:
                return f"the planned search '{query}' found nothing related"
        elif name == "read_section" and args.get("source_id") in planned_reads and not result.ok:
            return f"the planned section {args.get('source_id')} could not be read"
    return None


def heuristic_replan(question: str, plan: ReactPlan, reason: str, ctx: RunContext) -> ReactPlan:
    """Drop the failed steps and search again with the question's terms not yet found."""
    found = " ".join(c.text for chunks in ctx.retrieved.values() for c in chunks)
    missing = missing_words(question, found)  # as written, not stemmed
    candidates = [" ".join(missing), key_phrase(question), question.strip()]
    query = next((q for q in candidates if novel_query(q, ctx.searches)), "")
    steps = [PlanStep(action="search", target=query or key_phrase(question), purpose=reason)]
    steps += [
        PlanStep(action="read", purpose="read the best sections in full"),
        PlanStep(action="answer"),
    ]
    return ReactPlan(steps=steps, rationale=f"re-planned: {reason}")


class PlanningAgent:
    """Writes and revises the ReAct plan (model with structured output, or heuristic).

    Args:
        model: a chat model, or ``None`` for the heuristic plan.
        max_retries: corrections allowed for an invalid plan before the fallback.
    """

    def __init__(self, model: BaseChatModel | None, max_retries: int = 2) -> None:
        self.model = model
        self.max_retries = max_retries

    def plan(
        self,
        question: str,
        tools: Sequence[str],
        recalled: Sequence[Sequence[str]] = (),
        usage: Callable[[dict[str, int]], None] | None = None,
    ) -> StructuredResult[ReactPlan]:
        """A plan for ``question`` given the tool names and the source_ids cited by the
        user's similar past runs (best first)."""
        memory = (
            "Sections cited by this user's similar earlier questions: "
            + "; ".join(", ".join(run) for run in recalled if run)
            if any(recalled)
            else "No similar earlier questions."
        )
        human = f"Question: {question}\nTools: {', '.join(tools)}\n{memory}"
        return call_structured(
            self.model,
            ReactPlan,
            [SystemMessage(load_prompt("react_planner")), HumanMessage(human)],
            max_retries=self.max_retries,
            fallback=lambda: heuristic_react_plan(question, recalled),
            name="plan",
            usage=usage,
        )

    def replan(
        self,
        question: str,
        plan: ReactPlan,
        reason: str,
        ctx: RunContext,
        usage: Callable[[dict[str, int]], None] | None = None,
    ) -> StructuredResult[ReactPlan]:
        """A new plan after an observation contradicted ``plan`` (``reason``)."""
        found = ", ".join(ctx.retrieved) or "nothing yet"
        human = (
            f"Question: {question}\nCurrent plan: {plan.render()}\n"
            f"Contradiction: {reason}\nSections found so far: {found}\n"
            f"Searches already run: {'; '.join(ctx.searches) or 'none'}\n"
            "Write a revised plan that does not repeat a search."
        )
        return call_structured(
            self.model,
            ReactPlan,
            [SystemMessage(load_prompt("react_planner")), HumanMessage(human)],
            max_retries=self.max_retries,
            fallback=lambda: heuristic_replan(question, plan, reason, ctx),
            name="plan",
            usage=usage,
        )
