"""Print the CMake arguments that build llama.cpp for the vector units this CPU has.

llama.cpp's own runtime dispatch (``GGML_BACKEND_DL`` with ``GGML_CPU_ALL_VARIANTS``:
every CPU variant built, the best loaded at start) needs ``ggml_backend_load_all()``, which
llama-cpp-python 0.3.x does not call or expose (abetlen/llama-cpp-python#2069), so a build
for the machine it is installed on is chosen here instead, from the flags Linux reports in
``/proc/cpuinfo``:

- never ``-DGGML_NATIVE=ON``: a VM can report AMX without the OS enabling it, and a native
  build then dies with SIGILL in its first matrix product;
- AVX2/FMA/F16C (llama.cpp's default without native) only where the CPU has all three,
  else the plain SSE build;
- AVX-512 (F, BW, DQ, VL, CD) and its VNNI, BF16 and VBMI extensions, and AVX-VNNI, each
  only where reported (prompt evaluation of Qwen2.5-Coder-1.5B Q4_K_M on 2 cores: about
  1.45× the AVX2 build; see bench/README.md, bench_llm_engine.py). Only where reported: a
  build with AVX-VNNI on a CPU that has AVX-512 VNNI but not AVX-VNNI dies with SIGILL in
  some quantisations' kernels (seen with SmolLM2's).

Usage (the README's install line): ``CMAKE_ARGS="$(python3 scripts/llama_cmake_args.py)"``.
``--cpuinfo FILE`` reads another file (tests); with no such file (not Linux) the AVX2 build.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ALWAYS = ("-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")
ALWAYS += ("-DLLAMA_CURL=OFF",)
BASE = {"GGML_AVX": "avx", "GGML_AVX2": "avx2", "GGML_FMA": "fma", "GGML_F16C": "f16c"}
AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd")
EXTENSIONS = {
    "GGML_AVX512_VNNI": "avx512_vnni",
    "GGML_AVX512_BF16": "avx512_bf16",
    "GGML_AVX512_VBMI": "avx512vbmi",
}


def cpu_flags(cpuinfo: Path) -> set[str] | None:
    """The ``flags`` of the first processor in ``cpuinfo``; ``None`` when it cannot be read."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return None


def cmake_args(flags: set[str] | None) -> list[str]:
    """The ``-D`` arguments for a CPU with ``flags`` (``None``: unknown, the AVX2 build)."""
    args = list(ALWAYS)
    if flags is None:
        return args
    base = all(flag in flags for flag in BASE.values())
    args += [f"-D{option}={'ON' if base else 'OFF'}" for option in BASE]
    if base and all(flag in flags for flag in AVX512):
        args.append("-DGGML_AVX512=ON")
        args += [f"-D{option}=ON" for option, flag in EXTENSIONS.items() if flag in flags]
    if base and "avx_vnni" in flags:
        args.append("-DGGML_AVX_VNNI=ON")
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpuinfo", type=Path, default=Path("/proc/cpuinfo"))
    print(" ".join(cmake_args(cpu_flags(parser.parse_args().cpuinfo))))


if __name__ == "__main__":
    main()
