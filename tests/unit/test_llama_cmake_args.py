"""scripts/llama_cmake_args.py: the llama.cpp build flags chosen from /proc/cpuinfo."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_cmake_args.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llama_cmake_args", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n")
    return path


AVX2 = "fpu sse sse2 avx avx2 fma f16c"
AVX512 = f"{AVX2} avx512f avx512bw avx512dq avx512vl avx512cd avx512_vnni avx512_bf16"


def test_avx512_and_its_extensions_are_built_only_where_reported(script, tmp_path) -> None:
    args = script.cmake_args(script.cpu_flags(_cpuinfo(tmp_path, AVX512 + " amx_tile amx_int8")))
    assert "-DGGML_AVX512=ON" in args and "-DGGML_AVX512_VNNI=ON" in args
    assert "-DGGML_AVX512_BF16=ON" in args
    assert "-DGGML_AVX512_VBMI=ON" not in args  # not in the flags
    assert "-DGGML_AVX_VNNI=ON" not in args
    # never native, never AMX, even where the CPU reports it
    assert "-DGGML_NATIVE=OFF" in args and not any("AMX" in a for a in args)


def test_an_avx2_cpu_gets_the_portable_build_and_an_old_one_no_avx(script, tmp_path) -> None:
    avx2 = script.cmake_args(script.cpu_flags(_cpuinfo(tmp_path, AVX2)))
    assert "-DGGML_AVX2=ON" in avx2 and not any("AVX512" in a for a in avx2)
    old = script.cmake_args(script.cpu_flags(_cpuinfo(tmp_path, "fpu sse sse2 avx")))
    assert "-DGGML_AVX2=OFF" in old and "-DGGML_FMA=OFF" in old
    assert not any("AVX512" in a for a in old)


def test_an_unreadable_cpuinfo_gives_the_default_build(script, tmp_path) -> None:
    assert script.cpu_flags(tmp_path / "missing") is None
    args = script.cmake_args(None)
    assert "-DGGML_NATIVE=OFF" in args and not any("AVX" in a for a in args)
