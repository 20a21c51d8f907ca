"""Settings: one-line messages per bad field, masked secrets, provider construction errors."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sleuth.config import Settings, inspect_settings, mask_url, validation_messages
from sleuth.errors import ConfigError
from sleuth.llm import testing
from sleuth.llm.factory import make_chat_model


def test_validation_messages_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_INDEX_BACKEND", "foo")
    monkeypatch.setenv("SLEUTH_MAX_ITERATIONS", "0")
    monkeypatch.setenv("SLEUTH_RUN_TIMEOUT_S", "-1")
    with pytest.raises(ValidationError) as info:
        Settings()
    messages = validation_messages(info.value)
    assert messages["index_backend"] == (
        "SLEUTH_INDEX_BACKEND='foo': Input should be 'local', 'milvus' or 'postgres'"
    )
    assert messages["max_iterations"].startswith("SLEUTH_MAX_ITERATIONS='0': ")
    assert messages["run_timeout_s"].startswith("SLEUTH_RUN_TIMEOUT_S='-1': ")
    assert all("\n" not in m for m in messages.values())


def test_mask_url() -> None:
    assert mask_url("postgresql+psycopg://u:pw@host/db") == "postgresql+psycopg://u:***@host/db"
    assert mask_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert mask_url("http://host:19530") == "http://host:19530"


def test_inspect_settings_masks_secrets_and_marks_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_LLM_API_KEY", "sk-secret-1")
    monkeypatch.setenv("SLEUTH_MILVUS_TOKEN", "tok-secret-2")
    monkeypatch.setenv("SLEUTH_DATABASE_URL", "postgresql+psycopg://u:pw-secret-3@h/db")
    monkeypatch.setenv("SLEUTH_MAX_ITERATIONS", "abc")
    values, problems = inspect_settings()
    shown = repr(values) + repr(problems)
    for secret in ("sk-secret-1", "tok-secret-2", "pw-secret-3"):
        assert secret not in shown
    assert values["llm_api_key"] == "***"
    assert values["milvus_token"] == "***"
    assert values["database_url"] == "postgresql+psycopg://u:***@h/db"
    assert values["max_iterations"] == "abc"
    assert set(problems) == {"max_iterations"}
    assert values["top_k"] == "5"


@pytest.mark.parametrize(
    ("spec", "key_var"),
    [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic:claude-x", "ANTHROPIC_API_KEY")],
)
def test_provider_without_key_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, spec: str, key_var: str
) -> None:
    pytest.importorskip("langchain_" + spec.split(":")[0])
    monkeypatch.setattr(testing, "ALLOW_MODEL_REQUESTS", True)  # construction only, no request
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        make_chat_model(Settings(llm=spec))
    message = str(info.value)
    assert f"SLEUTH_LLM={spec}" in message
    assert "SLEUTH_LLM_API_KEY" in message and key_var in message
    assert "\n" not in message
