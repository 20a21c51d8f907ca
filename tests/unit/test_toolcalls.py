"""The LLM layer's one normaliser: every form of tool call and content real models send."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from sleuth.llm.toolcalls import (
    ToolCallNormalizer,
    VisibleStream,
    closes_unopened_reasoning,
    content_parts,
    message_text,
)

SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
    "required": ["query"],
}
ANSWER = {
    "type": "object",
    "properties": {"answer_text": {"type": "string"}},
    "required": ["answer_text"],
}
TOOLS = {"rag_search": SEARCH, "final_answer": ANSWER}


def _read(message: AIMessage):  # type: ignore[no-untyped-def]
    return ToolCallNormalizer(TOOLS).normalize(message)


def _calls(message: AIMessage) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in _read(message).calls]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "rag_search", "arguments": {"query": "murder punishment"}}\n'
        "</tool_call>",
        '{"name": "rag_search", "arguments": {"query": "murder punishment"}}',
        '{{"name": "rag_search", "arguments": {"query": "murder punishment"}}}',
        '```json\n{"name": "rag_search", "arguments": {"query": "murder punishment"}}\n```',
        '{"tool": "rag_search", "args": {"query": "murder punishment"}}',
        'functions.rag_search:{"query": "murder punishment"}',
        'I will search first.\n{"function": {"name": "rag_search", "arguments": '
        '"{\\"query\\": \\"murder punishment\\"}"}}',
    ],
)
def test_text_forms_of_one_call(text: str) -> None:
    reply = _read(AIMessage(content=text))
    assert [(c.name, c.arguments) for c in reply.calls] == [
        ("rag_search", {"query": "murder punishment"})
    ]
    assert reply.from_text and reply.errors == []
    assert "{" not in reply.text and "tool_call" not in reply.text and "```" not in reply.text


def test_several_calls_on_lines_and_the_qwen_double_brace_leak() -> None:
    # the exact shape llama-server returned in content for Qwen2.5-Coder-1.5B
    text = (
        '{{"name": "rag_search", "arguments": {"query": "murder punishment", "top_k": 1}}}\n'
        '{{"name": "final_answer", "arguments": {"answer_text": "Death [BNS_S103]."}}}'
    )
    assert _calls(AIMessage(content=text)) == [
        ("rag_search", {"query": "murder punishment", "top_k": 1}),
        ("final_answer", {"answer_text": "Death [BNS_S103]."}),
    ]


def test_structured_calls_with_string_and_double_encoded_arguments() -> None:
    once = json.dumps({"query": "theft"})
    twice = json.dumps(once)
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "rag_search", "args": {"query": "murder"}, "id": "a"},
        ],
        invalid_tool_calls=[
            {"name": "rag_search", "args": twice, "id": "b", "error": None, "type": "invalid"}
        ],
    )
    reply = _read(message)
    assert [(c.id, c.arguments) for c in reply.calls] == [
        ("a", {"query": "murder"}),
        ("b", {"query": "theft"}),
    ]
    assert not reply.from_text


def test_json_inside_a_string_field_is_unwrapped_or_refused() -> None:
    same_key = AIMessage(
        content="",
        tool_calls=[{"name": "rag_search", "args": {"query": '{"query": "murder"}'}, "id": "a"}],
    )
    assert _calls(same_key) == [("rag_search", {"query": "murder"})]
    other_key = AIMessage(
        content="",
        tool_calls=[{"name": "rag_search", "args": {"query": '{"q": "murder"}'}, "id": "b"}],
    )
    reply = _read(other_key)
    assert reply.calls == []
    assert "must be plain text, not a JSON object" in reply.errors[0].message


def test_unknown_tool_and_missing_argument_are_errors_for_the_model() -> None:
    reply = _read(
        AIMessage(
            content='{"name": "web_search", "arguments": {"query": "x"}}\n'
            '{"name": "rag_search", "arguments": {"top_k": 3}}'
        )
    )
    assert reply.calls == []
    unknown, missing = reply.errors
    assert "unknown tool 'web_search'" in unknown.message
    assert "rag_search, final_answer" in unknown.message
    assert missing.name == "rag_search" and "query" in missing.message


def test_arguments_that_are_not_an_object_are_an_error() -> None:
    message = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "rag_search", "args": '["a", "b"]', "id": "x", "error": None, "type": "x"}
        ],
    )
    reply = _read(message)
    assert reply.calls == [] and "must be a JSON object" in reply.errors[0].message


def test_plain_prose_is_text_not_a_call() -> None:
    reply = _read(AIMessage(content="Murder is punished with death [1]. See {section 103}."))
    assert reply.calls == [] and reply.errors == []
    assert reply.text == "Murder is punished with death [1]. See {section 103}."


def test_content_parts_join_text_and_keep_thinking_apart() -> None:
    content = [
        {"type": "thinking", "thinking": "The user asks about murder."},
        {"type": "text", "text": "Death or "},
        {},
        None,
        {"type": "text", "text": "life imprisonment [1]."},
        {"type": "reasoning", "reasoning": "cite S103"},
    ]
    text, thinking = content_parts(content)
    assert text == "Death or life imprisonment [1]."
    assert thinking == "The user asks about murder.\ncite S103"
    assert message_text(AIMessage(content="<think>hmm</think>Yes.")) == "Yes."
    spans = content_parts("", {"reasoning_content": "server-side reasoning"})
    assert spans == ("", "server-side reasoning")


@pytest.mark.parametrize(
    "cut",
    [
        '<tool_call>{"name": "read_section", "arguments": {"source_id": "BNS_S1',
        '{"name": "read_section", "arguments": {"source_id": "BNS_S1',
        '```json\n{"name": "read_section", "arguments": {"source_id": "BNS_S1',
    ],
    ids=["tool-tag", "bare", "fenced"],
)
def test_a_text_call_cut_off_inside_a_value_is_a_failed_call_with_its_reason(cut: str) -> None:
    # issue 28: '{"source_id": "BNS_S1' was run as a read of BNS_S1 without a word
    reply = _read(AIMessage(content=cut))
    assert reply.calls == []
    assert "cut off inside a value" in reply.errors[0].message
    assert "BNS_S1" in reply.errors[0].message


def test_a_text_call_missing_only_its_closing_braces_is_repaired() -> None:
    cut = '<tool_call>{"name": "rag_search", "arguments": {"query": "dowry death"'
    assert _calls(AIMessage(content=cut)) == [("rag_search", {"query": "dowry death"})]


def test_structured_arguments_cut_inside_a_value_are_a_failed_call_with_its_reason() -> None:
    # '{"source_id": "BNS_S1' once ran as a read of BNS_S1, maybe not the section meant
    cut = '{"query": "BNS_S1'
    message = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "rag_search", "args": cut, "id": "c", "error": None, "type": "invalid"}
        ],
    )
    reply = _read(message)
    assert reply.calls == []
    assert "cut off inside a value" in reply.errors[0].message
    assert "BNS_S1" in reply.errors[0].message
    closed = '{"query": "BNS_S103", "top_k": 3'  # only the brace missing: repaired
    message = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "rag_search", "args": closed, "id": "d", "error": None, "type": "invalid"}
        ],
    )
    assert _calls(message) == [("rag_search", {"query": "BNS_S103", "top_k": 3})]


# ---------------------------------------------------------------- reasoning shapes (property)

_REASONING = st.text(
    alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=80
)
_DECOY = '{"name": "final_answer", "arguments": {"answer_text": "DECOY"}}'
_REAL = '{"name": "rag_search", "arguments": {"query": "theft"}}'


@settings(max_examples=150, deadline=None)
@given(
    thought=_REASONING,
    tag=st.sampled_from(["think", "thinking", "reasoning", "THINK"]),
    shape=st.sampled_from(["closed", "bare_close", "unclosed_after"]),
    decoy=st.booleans(),
)
def test_reasoning_in_any_shape_never_reaches_text_or_calls(
    thought: str, tag: str, shape: str, decoy: bool
) -> None:
    """A decoy call or answer written inside reasoning is never taken, whatever the shape:
    ``<think>…</think>``, a bare ``</think>`` (the template opened it), or a reply that
    answers first and then opens a reasoning block it never closes."""
    inner = f"{thought} {_DECOY if decoy else ''} secretthought"
    reply = {
        "closed": f"<{tag}>{inner}</{tag}>{_REAL}",
        "bare_close": f"{inner}</{tag}>{_REAL}",
        "unclosed_after": f"{_REAL}<{tag}>{inner}",
    }[shape]
    text, thinking = content_parts(reply)
    assert "secretthought" not in text and "DECOY" not in text
    assert "secretthought" in thinking
    assert _calls(AIMessage(content=reply)) == [("rag_search", {"query": "theft"})]


# ---------------------------------------------------------------- reasoning in a stream


def _streamed(reply: str, cuts: list[int], reasoning_first: bool = False) -> tuple[str, int]:
    """What a :class:`VisibleStream` shows of ``reply`` sent in pieces cut at ``cuts``: the
    text of the last stream (a restart begins a new one) and the number of restarts."""
    stream = VisibleStream(reasoning_first=reasoning_first)
    shown, restarts = "", 0
    bounds = [0, *sorted(set(cuts)), len(reply)]
    for start, end in itertools.pairwise(bounds):
        text, restart = stream.feed(reply[start:end])
        if restart:
            shown, restarts = "", restarts + 1
        shown += text
    return shown + stream.end(), restarts


@settings(max_examples=200, deadline=None)
@given(
    thought=_REASONING,
    tag=st.sampled_from(["think", "thinking", "reasoning", "THINK"]),
    shape=st.sampled_from(["closed", "bare_close", "unclosed_after", "none"]),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12),
)
def test_a_stream_cut_anywhere_shows_what_the_whole_reply_shows(
    thought: str, tag: str, shape: str, cuts: list[int]
) -> None:
    """Pieces split at any point — inside a tag too — show the visible text that
    :func:`content_parts` reads from the whole reply; reasoning before a bare closing tag
    is shown only until that tag, which starts the stream again."""
    inner = f"{thought} {_DECOY} secretthought"
    answer = "Theft is punished with imprisonment <b>up to</b> three years [1]."
    reply = {
        "closed": f"<{tag}>{inner}</{tag}>{answer}",
        "bare_close": f"{inner}</{tag}>{answer}",
        "unclosed_after": f"{answer}<{tag}>{inner}",
        "none": answer,
    }[shape]
    cuts = [c for c in cuts if c < len(reply)]
    shown, restarts = _streamed(reply, cuts)
    assert shown.strip() == content_parts(reply)[0]
    assert restarts == (shape == "bare_close")
    held, restarts = _streamed(reply, cuts, reasoning_first=shape == "bare_close")
    assert held.strip() == content_parts(reply)[0] and restarts == 0


def test_a_model_known_to_reason_first_that_does_not_still_has_its_text_shown() -> None:
    assert _streamed("No tag at all here.", [3, 7], reasoning_first=True) == (
        "No tag at all here.",
        0,
    )


def test_a_reply_closing_a_block_it_never_opened_is_told_apart() -> None:
    assert closes_unopened_reasoning("plan the search</think>Answer [1].")
    assert not closes_unopened_reasoning("<think>plan</think>Answer [1].")
    assert not closes_unopened_reasoning("Answer [1].")
    assert not closes_unopened_reasoning(None)
