"""Fast start: commands that need neither a model nor the agent import neither.

Each command runs in a fresh interpreter (``sys.modules`` of this test process is full of
everything); the child reports which heavy modules it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.types import Document, Section

HEAVY = ("torch", "sentence_transformers", "transformers", "langchain", "langchain_core",
         "langgraph", "fastapi", "uvicorn", "mcp")  # fmt: skip
PROBE = """
import json, sys
sys.argv = ["sleuth", *sys.argv[2:]]
from sleuth.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(HEAVY)))
agents = sorted(m for m in sys.modules if m.startswith("sleuth.agents"))
with open(OUT, "w") as f:
    json.dump({"code": code, "heavy": heavy, "agents": agents}, f)
"""


def _imports(tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "imports.json"
    script = PROBE.replace("HEAVY", repr(json.dumps(HEAVY))).replace("OUT", repr(str(out)))
    env = {**os.environ, "SLEUTH_EMBEDDING_MODEL": "hashing-test-embedder"}
    subprocess.run(
        [sys.executable, "-c", script, "-", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return json.loads(out.read_text())


@pytest.fixture
def notes() -> None:
    """A collection 'notes' built with the hashing embedder (named in SLEUTH_EMBEDDING_MODEL)."""
    embedder = HashingEmbedder()
    s = Sleuth(Settings(embedding_model=embedder.name), embedder=embedder)
    doc = Document(
        doc_id="notes", path="notes.md", title="Notes", content_hash="h",
        sections=[Section(title_path=["Notes", "Lamp"], text="The lamp is cleaned on Tuesdays.")],
    )  # fmt: skip
    s.pipeline.ingest_documents([doc], "notes")
    s.close()


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["collections"],
        ["config"],
        ["users", "list"],
        ["search", "lamp", "-c", "notes", "--mode", "bm25"],
        ["delete", "notes", "-c", "notes"],
        ["delete", "-c", "notes", "--whole-collection"],
    ],
    ids=" ".join,
)
def test_light_commands_import_no_model_no_agent(
    notes: None, tmp_path: Path, args: list[str]
) -> None:
    found = _imports(tmp_path, *args)
    assert found["code"] == 0
    assert found["heavy"] == []
    assert found["agents"] == []  # search in particular runs without any agent code


def test_the_probe_sees_heavy_imports(notes: None, tmp_path: Path) -> None:
    found = _imports(tmp_path, "ask", "When is the lamp cleaned?", "-c", "missing")
    assert found["code"] == 1  # the agent service refuses the missing collection
    assert "langgraph" in found["heavy"] and found["agents"]


def test_a_question_too_long_is_refused_before_the_agent_is_imported(tmp_path: Path) -> None:
    found = _imports(tmp_path, "ask", "x" * 100_000)
    assert found["code"] == 2
    assert found["heavy"] == [] and found["agents"] == []
