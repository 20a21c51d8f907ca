"""The guided ("constrained runtime") mode: narrow typed agents on a fixed control graph.

Public API::

    from sleuth.agents.guided import GuidedRuntime, GuidedResult

    result = GuidedRuntime().run(question, ctx, tools, emitter, model_or_None,
                                 max_refinements=2, deadline=time.monotonic() + 300)
    result.answer, result.status, result.steps, result.trace

See :mod:`sleuth.agents.guided.runtime` for the graph, :mod:`sleuth.agents.guided.agents`
for the agents and their heuristic fallbacks, :mod:`sleuth.agents.guided.schemas` for their
typed outputs and :mod:`sleuth.agents.structured` for the structured-output bridge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sleuth.agents.guided.schemas import (
    Compression,
    CragVerdict,
    Decomposition,
    IntentParse,
    Plan,
    Refinement,
)
from sleuth.agents.structured import StructuredResult, call_structured

if TYPE_CHECKING:
    from sleuth.agents.guided.runtime import GuidedResult, GuidedRuntime, build_guided_graph

_RUNTIME = ("GuidedResult", "GuidedRuntime", "build_guided_graph")


def __getattr__(name: str) -> Any:
    # the runtime is imported on first use: it depends on the ReAct modules (finish, state),
    # which themselves use the guided agents, and an eager import would be circular
    if name in _RUNTIME:
        from sleuth.agents.guided import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Compression",
    "CragVerdict",
    "Decomposition",
    "GuidedResult",
    "GuidedRuntime",
    "IntentParse",
    "Plan",
    "Refinement",
    "StructuredResult",
    "build_guided_graph",
    "call_structured",
]
