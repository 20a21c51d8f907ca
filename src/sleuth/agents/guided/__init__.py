"""The guided ("constrained runtime") mode: narrow typed agents on a fixed control graph.

Public API::

    from sleuth.agents.guided import GuidedRuntime, GuidedResult

    result = GuidedRuntime().run(question, ctx, tools, emitter, model_or_None,
                                 max_refinements=2, deadline=time.monotonic() + 300)
    result.answer, result.status, result.steps, result.trace

See :mod:`sleuth.agents.guided.runtime` for the graph, :mod:`sleuth.agents.guided.agents`
for the agents and their heuristic fallbacks, :mod:`sleuth.agents.guided.schemas` for their
typed outputs and :mod:`sleuth.agents.guided.structured` for the structured-output bridge.
"""

from __future__ import annotations

from sleuth.agents.guided.runtime import GuidedResult, GuidedRuntime, build_guided_graph
from sleuth.agents.guided.schemas import (
    Compression,
    CragVerdict,
    Decomposition,
    IntentParse,
    Plan,
    Refinement,
)
from sleuth.agents.guided.structured import StructuredResult, call_structured

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
