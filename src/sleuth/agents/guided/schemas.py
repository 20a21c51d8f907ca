"""Typed outputs of the guided runtime's agents.

Each narrow agent of the guided ("constrained runtime") mode returns one of these models,
never free text: the intent parser an :class:`IntentParse`, the planner a :class:`Plan`, the
CRAG evaluator a :class:`CragVerdict`, the refinement agent a :class:`Refinement`, the
decomposition agent a :class:`Decomposition`, the compression agent a :class:`Compression`.

The model validators below are the *output validators*: a model output that breaks them is
sent back to the model with the error (see :func:`sleuth.agents.structured.call_structured`)
and, after the retries, replaced by the agent's heuristic fallback.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

RetrievalProfile = Literal["precise", "balanced", "broad"]
"""How wide the first search casts: ``precise`` (a named section: top 3), ``balanced``
(top 5), ``broad`` (overview or multi-facet questions: top 8)."""

Granularity = Literal["passage", "section", "document"]
"""The unit the question is about: a fact in a passage, a whole section, or a document's
structure (``document`` adds an ``outline`` call at enrichment)."""

Verdict = Literal["SUFFICIENT", "PARTIAL", "INSUFFICIENT"]


def _clean(text: str) -> str:
    return " ".join(text.split())


class IntentParse(BaseModel):
    """How to retrieve for a question: the router's (or intent parser's) decision."""

    retrieval_profile: RetrievalProfile = Field(
        description="precise: the question names a specific section; balanced: a usual "
        "question; broad: an overview or several facets"
    )
    normalized_query: str = Field(
        min_length=1, description="A keyword search query for the question (no filler words)"
    )
    graph_hint: bool = Field(
        description="true if the answer likely needs cross-referenced sections "
        "(the question mentions sections, definitions, references)"
    )
    granularity: Granularity = Field(
        description="passage: a specific fact; section: a whole provision; document: the "
        "structure or overview of a document"
    )
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in this parse, 0 to 1")

    @field_validator("normalized_query")
    @classmethod
    def _strip_query(cls, value: str) -> str:
        value = _clean(value)
        if not value:
            raise ValueError("normalized_query is blank")
        return value


class Plan(BaseModel):
    """The planner's retrieval strategy. The planner never answers the user.

    ``skip_retrieval``: ``none`` (retrieve), ``clarify`` (ask ``clarification`` back),
    ``hard_block`` (refuse), ``llm_only`` (a conversational message answered without the
    knowledge base; only with ``intent_class="conversational"``).
    """

    intent_class: Literal["conversational", "documentary"] = Field(
        description="documentary: needs the knowledge base; conversational: greetings, thanks, "
        "questions about the assistant itself"
    )
    skip_retrieval: Literal["none", "clarify", "hard_block", "llm_only"] = Field(
        default="none",
        description="none: retrieve (the usual case); clarify: the question is too ambiguous "
        "to search; hard_block: a harmful request; llm_only: conversational, no search needed",
    )
    clarification: str = Field(
        default="", description="With skip_retrieval=clarify: the question to ask the user"
    )
    primary_query: str = Field(min_length=1, description="The main search query")
    complementary_queries: list[str] = Field(
        default_factory=list,
        max_length=3,
        description="Up to 3 extra search queries for other facets of the question",
    )
    needs_compression: bool = Field(
        default=False, description="true if the evidence will likely be long"
    )
    strict_grounding: bool = Field(
        default=True, description="true if every claim must be cited from the knowledge base"
    )
    is_multi_part: bool = Field(
        default=False, description="true if the question asks several distinct things"
    )

    @field_validator("primary_query")
    @classmethod
    def _strip_primary(cls, value: str) -> str:
        value = _clean(value)
        if not value:
            raise ValueError("primary_query is blank")
        return value

    @field_validator("complementary_queries")
    @classmethod
    def _clean_complementary(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(q for q in (_clean(v) for v in value) if q))

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.skip_retrieval == "clarify" and not self.clarification.strip():
            raise ValueError("skip_retrieval=clarify needs a clarification question")
        if self.skip_retrieval == "llm_only" and self.intent_class != "conversational":
            raise ValueError("skip_retrieval=llm_only is only allowed for conversational intent")
        key = self.primary_query.lower()
        self.complementary_queries = [q for q in self.complementary_queries if q.lower() != key]
        return self


class CragVerdict(BaseModel):
    """Whether the retrieved evidence answers the question (CRAG's retrieval evaluator).

    Source: Yan et al. 2024, "Corrective Retrieval Augmented Generation" (arXiv:2401.15884):
    a lightweight evaluator grades retrieval as Correct / Ambiguous / Incorrect and triggers
    corrective actions; here SUFFICIENT / PARTIAL / INSUFFICIENT, the correction being a
    gap-driven query rewrite.
    """

    verdict: Verdict = Field(
        description="SUFFICIENT: the evidence answers the question; PARTIAL: it answers part "
        "of it; INSUFFICIENT: it does not answer it"
    )
    missing_information: str = Field(
        default="",
        description="What the evidence lacks, as a few key words (required unless SUFFICIENT)",
    )
    rationale: str = Field(default="", description="One sentence: why this verdict")

    @field_validator("verdict", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _gap_hint(self) -> CragVerdict:
        self.missing_information = _clean(self.missing_information)
        if self.verdict != "SUFFICIENT" and not self.missing_information:
            raise ValueError(
                f"verdict {self.verdict} needs missing_information: name what the evidence lacks"
            )
        return self


class Refinement(BaseModel):
    """A better retrieval query after a gap was detected."""

    refined_query: str = Field(
        min_length=1, description="The new search query, aimed at the missing information"
    )
    rationale: str = Field(default="", description="One sentence: what the query now targets")

    @field_validator("refined_query")
    @classmethod
    def _strip_query(cls, value: str) -> str:
        value = _clean(value)
        if not value:
            raise ValueError("refined_query is blank")
        return value


class Decomposition(BaseModel):
    """Sub-questions of a multi-part question, each answerable on its own.

    ``sub_questions`` is empty when the question is not decomposable (a single question);
    otherwise it holds 2 to 4 sub-questions.
    """

    sub_questions: list[str] = Field(
        default_factory=list,
        max_length=4,
        description="2 to 4 self-contained sub-questions; [] if the question is single",
    )
    synthesis_hint: str = Field(
        default="", description="How to combine the sub-answers (compare, list, sequence...)"
    )

    @field_validator("sub_questions")
    @classmethod
    def _clean_questions(cls, value: list[str]) -> list[str]:
        cleaned = list(dict.fromkeys(q for q in (_clean(v) for v in value) if q))
        if len(cleaned) == 1:
            raise ValueError(
                "a decomposition needs 2 to 4 distinct sub-questions (or [] if the question "
                "is a single question)"
            )
        return cleaned


class CompressedPassage(BaseModel):
    """The kept text of one evidence section (verbatim sentences only)."""

    source_id: str = Field(min_length=1, description="The section's source_id")
    text: str = Field(min_length=1, description="Sentences copied verbatim from the section")


class Compression(BaseModel):
    """The evidence cut down to what bears on the question."""

    passages: list[CompressedPassage] = Field(
        min_length=1, description="One entry per section kept, most relevant first"
    )
