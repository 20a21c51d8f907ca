"""Issue 28's inputs through real ``sleuth ask`` processes, over the wire: a model server
that never answers (the wall-clock deadline of the whole process), a model that answers a
false claim in Chinese or only a greeting (never shown as a cited answer), and a collection
built with an embedding model of another dimension (one clear error line). The model is the
loopback fault server (``fault_server.py``); the library-level tests of the same inputs are
in ``test_model_faults.py`` and ``tests/unit/test_cli_search_ingest.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.retrieval.embeddings import DEFAULT_MODEL, HashingEmbedder
from tests.helpers import STATUTE_SECTIONS, make_document
from tests.integration.fault_server import FaultServer, hang, reply

pytestmark = pytest.mark.integration

MURDER = "What is the punishment for murder?"
THEFT = "What is the punishment for theft?"
MODES = ("guided", "react")
RUN_TIMEOUT_S = 5
GRACE_S = 2
"""What a run may take past its deadline (``test_model_faults``: ``elapsed < 4 + 2``)."""

EXE = str(Path(sys.executable).with_name("sleuth"))


def _env(data: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without its own ``SLEUTH_*`` settings (a developer's
    SLEUTH_LLM or SLEUTH_RERANK would change what runs), on ``data``, memory off (a run
    must not recall an earlier test's answer)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    return {**kept, "SLEUTH_DATA_DIR": str(data), "SLEUTH_MEMORY": "false", **extra}


def _sleuth(data: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``sleuth *args`` and its wall-clock time, measured around the whole process."""
    started = time.monotonic()
    result = subprocess.run(
        [EXE, *args], env=_env(data, **env), capture_output=True, text=True, timeout=120
    )
    return result, time.monotonic() - started


def _ask(
    server: FaultServer, data: Path, question: str, collection: str, mode: str, *flags: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``sleuth ask question -c collection --mode mode *flags`` against ``server``."""
    return _sleuth(
        data,
        "ask",
        question,
        "-c",
        collection,
        "--mode",
        mode,
        *flags,
        SLEUTH_LLM="openai:fault",
        SLEUTH_LLM_BASE_URL=server.url,
        SLEUTH_RUN_TIMEOUT_S=str(RUN_TIMEOUT_S),
        OPENAI_API_KEY="none",
    )


def _answer_box(stdout: str) -> str:
    """The last panel of the human output (the answer, or what stands for it) and the
    status line after it: the trace above it may show text the checks then replaced."""
    start = stdout.rfind("╭")
    assert start >= 0, stdout
    return stdout[start:]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data dir for the module (the bundled model's ONNX export, ~10 s, is made once per
    data dir): collection ``statutes`` of STATUTE_SECTIONS ingested by ``sleuth ingest``
    (JSONL records keep their ids, BNS_S303 among them), and ``dim64``, the same sections
    indexed by a 64-d model recorded under the bundled model's name."""
    root = tmp_path_factory.mktemp("cli-faults")
    records = root / "statutes.jsonl"
    records.write_text(
        "".join(
            json.dumps({"id": sid, "title": title, "text": text}) + "\n"
            for sid, (title, text) in STATUTE_SECTIONS.items()
        )
    )
    data = root / "data"
    ingest, _ = _sleuth(
        data, "ingest", str(records), "-c", "statutes", "--id-field", "id", SLEUTH_LLM="heuristic"
    )
    assert ingest.returncode == 0, ingest.stderr
    # another model at the same name: tests/unit/test_cli_search_ingest.py's technique
    embedder = HashingEmbedder(dim=64, name=DEFAULT_MODEL)
    settings = Settings(data_dir=data, database_url=None, index_backend="local", memory=False)
    app = Sleuth(settings, embedder=embedder)
    app.pipeline.ingest_documents([make_document(STATUTE_SECTIONS)], "dim64")
    app.close()
    return data


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_against_a_hung_server_exits_within_its_deadline_by_the_clock(
    data: Path, mode: str
) -> None:
    """The whole process, not the trace's own timer: a model call left hanging must neither
    outlive the deadline nor hold the interpreter at exit.

    The start-up allowance is measured, not guessed: the same question, same mode, same
    collection, with the heuristic reasoner (no model) is everything the hung run does but
    wait for the model: interpreter start, imports, the embedding model's load, the search,
    and the exit (~2.5 s here; ``sleuth --help`` alone is ~0.3 s, so --help would be too
    small a yardstick). Measured in the same test, it scales with the machine's load."""
    heuristic = {"SLEUTH_LLM": "heuristic"}
    baseline, startup = _sleuth(data, "ask", MURDER, "-c", "statutes", "--mode", mode, **heuristic)
    assert baseline.returncode == 0, baseline.stdout + baseline.stderr
    with FaultServer([hang()]) as server:
        result, elapsed = _ask(server, data, MURDER, "statutes", mode)
    assert server.requests, "the model was asked"
    assert elapsed < RUN_TIMEOUT_S + GRACE_S + startup, (elapsed, startup)
    assert elapsed > RUN_TIMEOUT_S, elapsed  # it did wait for the model, up to the deadline
    # a timed-out run still answers from its evidence; a cited answer exits 0 (cli/ask.py)
    assert result.returncode == 0, result.stdout + result.stderr
    box = _answer_box(result.stdout)
    assert box.rstrip().endswith("status: timeout"), box
    assert "Citations:" in box and "BNS_S103" in box.split("Citations:")[1], box
    assert "did not answer within the run's remaining" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "said",
    ["盗窃罪的最高刑罚是死刑 [BNS_S303]。", "Hello there."],
    ids=["false-claim-in-chinese", "greeting"],
)
def test_a_reply_the_support_check_flags_is_no_cited_answer_on_the_cli(
    data: Path, mode: str, said: str
) -> None:
    claim = said.split(" [")[0]
    with FaultServer([reply(said)]) as server:
        shown, _ = _ask(server, data, THEFT, "statutes", mode)
        dumped, _ = _ask(server, data, THEFT, "statutes", mode, "--json")
    assert server.requests and all(b["model"] == "fault" for b in server.requests)

    assert shown.returncode == 3, shown.stdout + shown.stderr  # EXIT_INSUFFICIENT
    box = _answer_box(shown.stdout)
    assert "Insufficient context" in box.splitlines()[0], box  # the panel's title
    assert "Citations:" not in box and "• [" not in box, box  # BNS_S303 is not cited
    assert claim not in box and "死刑" not in box, box
    assert box.rstrip().endswith("status: insufficient_context"), box
    if claim in shown.stdout:  # the streamed reply was shown live: it is said to be replaced
        assert "The checked answer below differs from the text streamed above" in shown.stdout
    assert "Traceback" not in shown.stderr

    assert dumped.returncode == 3, dumped.stderr
    run: dict[str, Any] = json.loads(dumped.stdout)
    answer = run["answer"]
    assert run["status"] == "insufficient_context"
    assert answer["is_insufficient_context"] is True
    assert answer["citations"] == []
    assert claim not in answer["answer_text"] and "死刑" not in answer["answer_text"]


@pytest.mark.parametrize("mode", MODES)
def test_ask_on_a_collection_of_another_dimension_says_so_on_one_line(
    data: Path, mode: str
) -> None:
    result, _ = _sleuth(data, "ask", THEFT, "-c", "dim64", "--mode", mode, SLEUTH_LLM="heuristic")
    assert result.returncode == 1, result.stdout + result.stderr  # EXIT_ERROR
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("error: ") and "collection 'dim64' holds 64-d vectors" in line, line
    assert f"'{DEFAULT_MODEL}' now gives 384-d vectors" in line, line
    assert "Traceback" not in result.stderr + result.stdout
    assert "query vector must have shape" not in result.stdout + result.stderr
    assert "repeated the same tool call" not in result.stdout + result.stderr
