"""A real llama.cpp server with a 2,048-token window: sleuth reads the window from the
server (``GET /props``) and fits every prompt to it — a 4,000-character question, a 2.4 MB
section and some 50 retrieved chunks included (counted in guided mode, whose retrieval does
not depend on the model) — in both modes. llama-server refuses a longer prompt with an HTTP
400, which would end the run as an error (sleuth.llm.calls.ContextWindowExceeded).

That every prompt fitted is read from the server's own log, not from sleuth's estimate: for
each task llama-server logs the tokens it generated (``eval time = … / N tokens``) and, when
it frees the slot, the tokens the slot then holds (``stop processing: n_tokens = T``), i.e.
the whole prompt (cached prefix included) plus the reply less its last token; so the prompt
took ``T - N + 1`` tokens (the ``usage.prompt_tokens`` of its reply, as compared by hand).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import sleuth.service as service_module
from sleuth.agents.state import RunStatus
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.llm import testing
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.tools.base import RunContext
from tests.helpers import STATUTE_SECTIONS, make_document
from tests.integration.test_model_faults import HUGE

pytestmark = pytest.mark.integration

WINDOW = 2048
"""The ``-c`` of the ``qwen05_server_2k`` fixture."""
SERVER_LOG = "llama-server-qwen0.5b-2k*/server.log"
"""Where ``conftest._llama_server`` writes that server's output, under the session's base
temporary directory (``tmp_path_factory.mktemp(f"llama-server-{alias}") / "server.log"``)."""

LANTERNS = 60
FIRST_LANTERN = 401
CITED = 8
"""Sections each generated section cites (``follow_references`` surfaces 8 at most)."""
NIGHTS = 48
"""Sentences of each generated section: ~970 words."""
CHUNKS = 7
"""Chunks of each generated section (160 words, 30 overlapping: the default chunking)."""
MIN_CHUNKS = 50


def lantern_sections() -> dict[str, tuple[str, str]]:
    """60 sections sharing the question's words, 7 chunks each; each cites section 1 (the
    2.4 MB one) and 7 others, in its first chunk, so following its references retrieves
    every chunk of 8 sections."""
    sections = {}
    for i in range(LANTERNS):
        number = FIRST_LANTERN + i
        cited = [1, *(FIRST_LANTERN + (i * CITED + k + 1) % LANTERNS for k in range(CITED - 1))]
        listed = ", ".join(str(n) for n in cited[:-1]) + f" and {cited[-1]}"
        nights = " ".join(
            f"On night {night} the keeper of lantern {number} enters in the register of "
            f"lanterns the oil that lantern {number} burned."
            for night in range(1, NIGHTS + 1)
        )
        sections[f"LAMP_S{number}"] = (
            f"Oil of lantern {number}.",
            f"Sections {listed} apply to lantern {number}. {nights}",
        )
    return sections


QUESTION = (
    "What must the register of lanterns record for each wick about the oil of its lantern? "
    + "Be thorough. " * 300
)[:4000]


def _server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = {path.resolve() for path in tmp_path_factory.getbasetemp().glob(SERVER_LOG)}
    assert len(logs) == 1, f"expected the log of the qwen05_server_2k fixture, found {logs}"
    return logs.pop()


_LAUNCHED = re.compile(r"\| task (\d+) \| processing task")
_GENERATED = re.compile(r"\| task (\d+) \|\s+eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
_RELEASED = re.compile(r"\| task (\d+) \| stop processing: n_tokens = (\d+), truncated = (\d+)")
_REFUSED = re.compile(r"exceeds the available context size")
_CANCELLED = re.compile(r"cancel task, id_task = (\d+)")


def _log_since(path: Path, offset: int, wait_s: float = 15.0) -> str:
    """What the server logged after ``offset``, once every task it started has released its
    slot (the reply may reach the client before the server logs the release)."""
    deadline = time.monotonic() + wait_s
    while True:
        text = path.read_bytes()[offset:].decode("utf-8", errors="replace")
        released = {task for task, _, _ in _RELEASED.findall(text)}
        if set(_LAUNCHED.findall(text)) <= released or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


def prompt_tokens(log: str) -> dict[int, int]:
    """Each task's prompt in tokens, as the server counted them (see the module doc).

    A task the client gave up on (its request timed out: ``cancel task``) logs no timings,
    so its prompt is not counted; the client's retry sends the same prompt again as a new
    task. Fails when the server refused a prompt, cut one (``truncated = 1``) or left
    another task without its generation or release line (the count would be unknown)."""
    assert not _REFUSED.search(log), "llama-server refused a prompt longer than its window"
    generated = {int(task): int(n) for task, n in _GENERATED.findall(log)}
    released = {int(task): (int(n), int(cut)) for task, n, cut in _RELEASED.findall(log)}
    cancelled = {int(task) for task in _CANCELLED.findall(log)}
    prompts = {}
    for task in map(int, _LAUNCHED.findall(log)):
        if task in cancelled and task not in generated:
            continue
        assert task in generated and task in released, f"task {task} not logged whole:\n{log}"
        held, truncated = released[task]
        assert truncated == 0, f"llama-server truncated the prompt of task {task}"
        prompts[task] = held - generated[task] + 1
    return prompts


@pytest.mark.parametrize("mode", ["guided", "react"])
def test_every_prompt_fits_a_2048_token_server(
    qwen05_server_2k: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """The issue's scenario: a 2 MB section, a 4,000-char question and ~50 retrieved chunks
    against a 2,048-token server — the run completes, every prompt the server evaluated is
    ≤ the window (its own log), and the trims are in the trace."""
    contexts: list[RunContext] = []

    class RecordedContext(RunContext):
        """The run's context, kept: the trace names the retrieved sections, not chunks."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            contexts.append(self)

    monkeypatch.setattr(service_module, "RunContext", RecordedContext)
    embedder = HashingEmbedder()
    settings = Settings(
        data_dir=tmp_path / "data",
        embedding_model=embedder.name,
        index_backend="local",
        llm="openai:qwen0.5b-2k",
        llm_base_url=qwen05_server_2k,
        llm_api_key="none",
        llm_timeout_s=300,
        planner="heuristic",
        reflection="heuristic",
        memory=False,
        max_iterations=3,
        # neither the run's deadline (default 300 s) nor the request timeout is what is
        # tested: on two cores shared with another llama.cpp process a ReAct run of ~6 model
        # calls took 270-400 s (42 s on idle ones)
        run_timeout_s=600,
    )
    log = _server_log(tmp_path_factory)
    with testing.block_model_requests(False):
        app = Sleuth(settings, embedder=embedder)
        sections = {
            **STATUTE_SECTIONS,
            "LAMP_S1": ("Register of lanterns.", HUGE),
            **lantern_sections(),
        }
        app.pipeline.ingest_documents([make_document(sections)], "test")
        assert len(app.kb.section("test", f"LAMP_S{FIRST_LANTERN}")) == CHUNKS
        assert 3800 < len(QUESTION) <= 4000
        offset = log.stat().st_size
        response = app.agent.execute_agentic_search(QUESTION, "test", mode=mode)
        app.close()
    served = _log_since(log, offset)

    # the run completes: an answer through the run's own ends. Not ERROR (a refused or
    # unfittable prompt ends there) nor TIMEOUT (cut by the deadline); ReAct's loop may also
    # stop at its iteration cap or on a repeated call and answer from the evidence, as
    # designed for a small model
    ends = {RunStatus.COMPLETED, RunStatus.INSUFFICIENT_CONTEXT}
    if mode == "react":
        ends |= {RunStatus.MAX_ITERATIONS, RunStatus.REPEATED_ACTION}
    assert response.status in ends, (response.status, response.trace["error"])
    assert response.answer.answer_text

    # every prompt the server evaluated fits its window
    prompts = prompt_tokens(served)
    assert prompts, f"no prompt in the server's log:\n{served}"
    assert max(prompts.values()) <= WINDOW, prompts

    # the question or the evidence had to be cut, and the trace says so
    assert response.trace["context_tokens"] == WINDOW
    assert response.trace["prompt_trims"], "the question or the evidence had to be cut"

    # ~50 chunks retrieved (the guided runtime's retrieval does not depend on the model: the
    # search, the references of its best sections, the refinement searches and reads); the
    # 2.4 MB section's 3,077 chunks aside, which alone would pass
    (ctx,) = contexts
    assert set(ctx.retrieved) == set(response.trace["retrieved_source_ids"])
    if mode == "guided":
        assert "LAMP_S1" in ctx.retrieved
        lanterns = sum(len(chunks) for sid, chunks in ctx.retrieved.items() if sid != "LAMP_S1")
        assert lanterns >= MIN_CHUNKS, {sid: len(chunks) for sid, chunks in ctx.retrieved.items()}
