"""Settings, read from ``SLEUTH_*`` environment variables (and a ``.env`` file if present).

Every field has a description; ``sleuth config`` prints the values in force.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


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
    index_backend: Literal["local", "milvus"] = Field(
        default="local", description="'local' (bm25s + numpy, embedded) or 'milvus'"
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
    max_iterations: int = Field(default=10, ge=1, description="ReAct loop cap (tool rounds)")
    max_refinements: int = Field(
        default=2, ge=0, description="Guided mode: CRAG refinement rounds at most"
    )
    run_timeout_s: float = Field(default=300.0, gt=0, description="Wall-clock cap of one run")
    top_k: int = Field(default=5, ge=1, le=100, description="Default hits per search")
    default_collection: str = Field(default="default", description="Collection used by default")

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "catalog.sqlite3"

    @property
    def catalog_url(self) -> str:
        return self.database_url or f"sqlite:///{self.sqlite_path}"
