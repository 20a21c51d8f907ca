"""The ``recall_similar`` tool: the user's past runs on similar questions.

The tool reads the run's user (``RunContext.user_id``) and collection, and shows past
questions, answers and the sections they cited. It tracks nothing in the run's context: a
memory is a pointer to sections worth reading again, not evidence, so citing a section the
run has not retrieved itself is still refused by the citation validator.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.errors import ToolError
from sleuth.memory import MAX_RECALL, AgentMemory
from sleuth.tools.base import RunContext, Tool, ToolResult

ANSWER_CHARS = 600
NOT_EVIDENCE = (
    "These are your earlier answers, not evidence: use them to find which sections to read "
    "again (read_section, rag_search) and cite only sections retrieved in this run."
)


class RecallArgs(BaseModel):
    query: str = Field(min_length=1, description="The question or topic to look up")
    limit: int = Field(default=3, ge=1, le=MAX_RECALL, description="How many past runs to return")


def _snippet(text: str, limit: int = ANSWER_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def build_memory_tools(memory: AgentMemory) -> list[Tool]:
    """The ``recall_similar`` tool bound to ``memory``."""

    def recall_similar(args: RecallArgs, ctx: RunContext) -> ToolResult:
        try:
            memories = memory.recall_similar(
                ctx.user_id, args.query, args.limit, collection=ctx.collection
            )
        except Exception as exc:  # an unavailable memory is an observation, not a crash
            raise ToolError(f"memory unavailable: {type(exc).__name__}: {exc}") from exc
        results = [
            {
                "task_id": m.task_id,
                "question": m.question,
                "answer": _snippet(m.answer_text),
                "cited_sections": m.citations,
                "status": m.status,
                "verdicts": m.verdicts,
                "created_at": m.created_at.isoformat(timespec="seconds"),
                "score": round(m.score, 4),
            }
            for m in memories
        ]
        cited = list(dict.fromkeys(sid for m in memories for sid in m.citations))
        status = f"recall_similar '{args.query}': {len(results)} past runs" + (
            f" (they cited {', '.join(cited)}; read them again to cite them)" if cited else ""
        )
        return ToolResult(
            status=status,
            payload={"query": args.query, "memories": results, "note": NOT_EVIDENCE},
        )

    return [
        Tool(
            "recall_similar",
            "Recall your own earlier runs on similar questions in this collection: past "
            "questions, answers and the source_ids they cited. Memories are not evidence: use "
            "them to find which sections to read again, and cite only sections retrieved in "
            "this run (rag_search, read_section, follow_references).",
            RecallArgs,
            recall_similar,
        )
    ]
