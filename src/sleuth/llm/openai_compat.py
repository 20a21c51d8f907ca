"""The ``openai`` provider, lenient with what OpenAI-compatible servers send.

:func:`lenient` turns a ``langchain_openai.ChatOpenAI`` into a subclass whose replies pass
through :func:`sleuth.llm.toolcalls.decode_wire_arguments` before LangChain parses them, so a
tool call whose arguments arrive encoded twice (or as an object) reaches the agent as a call
instead of failing the request.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sleuth.llm.toolcalls import decode_wire_arguments


@cache
def _lenient_class() -> type:
    from langchain_openai import ChatOpenAI

    class LenientChatOpenAI(ChatOpenAI):  # type: ignore[misc]
        """ChatOpenAI that repairs tool-call arguments before parsing (see module doc)."""

        def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> Any:
            if not isinstance(response, dict) and hasattr(response, "model_dump"):
                response = response.model_dump()
            if isinstance(response, dict):
                response = decode_wire_arguments(response)
            return super()._create_chat_result(response, generation_info)

    return LenientChatOpenAI


def lenient(model: Any) -> Any:
    """``model`` as a lenient ``ChatOpenAI`` when it is a plain ``ChatOpenAI`` (the subclass
    adds no fields, so the instance keeps every setting); any other model is returned as is.
    """
    from langchain_openai import ChatOpenAI

    if type(model) is ChatOpenAI:
        model.__class__ = _lenient_class()
    return model
