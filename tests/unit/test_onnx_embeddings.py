"""The bundled all-MiniLM-L6-v2 in onnxruntime: same vectors as torch, lazy imports, cache.

One real ONNX export (a few seconds, torch) is made per test session into a temporary data
dir; the cache tests copy it so that they can damage their own copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.retrieval import embeddings, onnx_embedder
from sleuth.retrieval.embeddings import (
    DEFAULT_MODEL,
    SentenceTransformerEmbedder,
    bundled_model_path,
    onnx_cache_dir,
    resolve_backend,
)
from sleuth.retrieval.onnx_embedder import ModelSpec, OnnxEmbedder

SENTENCES = [
    "What is the punishment for murder?",
    "Whoever intentionally causes the death of a person commits murder and shall be punished "
    "with death or imprisonment for life, and shall also be liable to fine.",
    "Consumer disputes redressal commission",
    "   leading and trailing spaces   ",
    "",
    "x " * 400,  # longer than max_seq_length: truncated at 256 tokens
]


@pytest.fixture(scope="session")
def onnx_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir whose cache holds a real fp32 export of the bundled model."""
    data = tmp_path_factory.mktemp("onnx-data")
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, onnx_cache_dir(data))
    assert model.built
    return data


@pytest.fixture
def private_cache(onnx_data_dir: Path, tmp_path: Path) -> Path:
    """A copy of the session's data dir, free to be damaged; returns the copy's data dir."""
    data = tmp_path / "data"
    shutil.copytree(onnx_data_dir, data, copy_function=shutil.copy2)
    return data


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)


def test_onnx_vectors_match_torch(onnx_data_dir: Path) -> None:
    onnx = SentenceTransformerEmbedder(backend="onnx", data_dir=onnx_data_dir)
    torch_model = SentenceTransformerEmbedder(backend="torch")
    assert (onnx.backend, torch_model.backend) == ("onnx", "torch")
    assert (onnx.name, onnx.dim) == (torch_model.name, torch_model.dim) == (DEFAULT_MODEL, 384)
    got, want = onnx.embed(SENTENCES), torch_model.embed(SENTENCES)
    assert got.shape == want.shape == (len(SENTENCES), 384)
    assert got.dtype == np.float32
    assert _cos(got, want).min() >= 0.999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # the batching (sorted by length, padded per batch) does not change the vectors
    one_by_one = np.concatenate([onnx.embed([s]) for s in SENTENCES])
    assert _cos(one_by_one, got).min() >= 0.99999
    assert onnx.embed([]).shape == (0, 384)


def test_import_and_query_do_not_import_torch(onnx_data_dir: Path) -> None:
    code = (
        "import sys\n"
        "from sleuth.retrieval.embeddings import get_embedder\n"
        "assert 'torch' not in sys.modules\n"
        "model = get_embedder()\n"
        "vector = model.embed(['What is the punishment for murder?'])\n"
        "assert vector.shape == (1, 384), vector.shape\n"
        "assert model.backend == 'onnx', model.backend\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env["SLEUTH_DATA_DIR"] = str(onnx_data_dir)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=onnx_data_dir,  # no .env of the checkout
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_first_export_does_not_import_torch_in_the_asking_process(tmp_path: Path) -> None:
    # the export runs in a child process: a server whose first query exports the model
    # must not hold torch (~350 MB) for the rest of its life
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from sleuth.retrieval.embeddings import bundled_model_path, onnx_cache_dir\n"
        "from sleuth.retrieval.onnx_embedder import OnnxEmbedder\n"
        "model = OnnxEmbedder(bundled_model_path(), 'all-MiniLM-L6-v2', "
        "onnx_cache_dir(Path(sys.argv[1])))\n"
        "assert model.built\n"
        "assert model.embed(['murder']).shape == (1, 384)\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_failed_export_names_the_childs_error(tmp_path: Path) -> None:
    spec = ModelSpec(tmp_path / "no-such-model", 256, 384)
    with pytest.raises(ConfigError, match="exporting the embedding model to ONNX failed"):
        onnx_embedder.export_in_child(spec, tmp_path / "model.onnx")


def test_second_load_reuses_the_cache(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_export(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_embedder, "export_in_child", no_export)
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, onnx_cache_dir(private_cache))
    assert not model.built
    assert model.embed(["murder"]).shape == (1, 384)


def test_copied_cache_with_new_mtime_is_accepted_by_its_hash(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = onnx_cache_dir(private_cache) / "model.onnx"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    monkeypatch.setattr(onnx_embedder, "export_in_child", lambda *a: pytest.fail("re-exported"))
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, path.parent)
    assert not model.built
    manifest = json.loads(path.with_name("model.onnx.json").read_text())
    assert manifest["files"][0]["mtime_ns"] == 1_000_000_000  # refreshed: fast again next time


def test_fp32_weights_are_kept_apart_from_the_graph(onnx_data_dir: Path) -> None:
    # onnxruntime maps external weights from their file instead of copying them out of the
    # protobuf: ~85 MB less resident per process that loads the model
    cache = onnx_cache_dir(onnx_data_dir)
    graph, weights = cache / "model.onnx", cache / "model.onnx.data"
    assert graph.stat().st_size < 1_000_000 < 80_000_000 < weights.stat().st_size
    manifest = json.loads((cache / "model.onnx.json").read_text())
    assert [f["file"] for f in manifest["files"]] == ["model.onnx", "model.onnx.data"]


@pytest.mark.parametrize("lost", ["model.onnx", "model.onnx.data"])
def test_a_lost_file_is_rebuilt(private_cache: Path, lost: str) -> None:
    cache = onnx_cache_dir(private_cache)
    (cache / lost).unlink()
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, cache)
    assert model.built and (cache / lost).is_file()
    assert model.embed(["murder"]).shape == (1, 384)


def test_partial_file_is_detected_and_rebuilt(private_cache: Path) -> None:
    cache = onnx_cache_dir(private_cache)
    path = cache / "model.onnx.data"
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size // 3)
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, cache)
    assert model.built
    assert path.stat().st_size == size
    want = SentenceTransformerEmbedder(backend="onnx", data_dir=private_cache).embed(SENTENCES)
    assert _cos(model.embed(SENTENCES), want).min() >= 0.9999
    assert not list(cache.glob(".*.tmp"))  # no temporary file left behind


def _good(data_dir: Path) -> Path:
    """The session's real fp32 export."""
    return onnx_cache_dir(data_dir) / "model.onnx"


def _fake_export(source: Path, calls: list[int]) -> object:
    """An ``export_in_child`` stand-in that copies a good export (and counts its calls)."""

    def export(spec: ModelSpec, target: Path) -> None:
        calls.append(1)
        manifest = json.loads(source.with_name("model.onnx.json").read_text())
        for record in manifest["files"]:
            shutil.copy2(source.with_name(record["file"]), target.with_name(record["file"]))
            st = target.with_name(record["file"]).stat()
            record.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        target.with_name("model.onnx.json").write_text(json.dumps(manifest))

    return export


def test_overwritten_bytes_are_detected_and_rebuilt(
    onnx_data_dir: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = onnx_cache_dir(private_cache)
    path = cache / "model.onnx.data"
    with path.open("r+b") as f:  # same size, new mtime: the sha256 no longer matches
        f.seek(path.stat().st_size // 2)
        f.write(b"\xff" * 4096)
    calls: list[int] = []
    good = _good(onnx_data_dir)
    monkeypatch.setattr(onnx_embedder, "export_in_child", _fake_export(good, calls))
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, cache)
    assert model.built and calls == [1]
    assert path.read_bytes() == good.with_name("model.onnx.data").read_bytes()


def test_damage_with_the_same_stat_is_caught_by_the_probes(
    onnx_data_dir: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = onnx_cache_dir(private_cache)
    path = cache / "model.onnx.data"
    st = path.stat()
    with path.open("r+b") as f:  # zero the last layers' weights, then put the mtime back
        f.seek(st.st_size - 4_000_000)
        f.write(b"\0" * 3_000_000)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    calls: list[int] = []
    monkeypatch.setattr(
        onnx_embedder,
        "export_in_child",
        _fake_export(onnx_cache_dir(onnx_data_dir) / "model.onnx", calls),
    )
    model = OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, cache)
    assert model.built and calls == [1]


def test_concurrent_first_loads_export_once(
    onnx_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(
        onnx_embedder,
        "export_in_child",
        _fake_export(onnx_cache_dir(onnx_data_dir) / "model.onnx", calls),
    )
    cache = onnx_cache_dir(tmp_path)
    models: list[OnnxEmbedder] = []
    threads = [
        threading.Thread(
            target=lambda: models.append(OnnxEmbedder(bundled_model_path(), DEFAULT_MODEL, cache))
        )
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(models) == 3 and calls == [1]
    assert sorted(m.built for m in models) == [False, False, True]


def test_int8_variant_stays_close_to_fp32(private_cache: Path) -> None:
    fp32 = SentenceTransformerEmbedder(backend="onnx", data_dir=private_cache)
    int8 = SentenceTransformerEmbedder(backend="onnx-int8", data_dir=private_cache)
    assert int8.backend == "onnx-int8" and int8.name == DEFAULT_MODEL
    assert (onnx_cache_dir(private_cache) / "model-int8.onnx").is_file()
    cos = _cos(int8.embed(SENTENCES[:3]), fp32.embed(SENTENCES[:3]))
    assert cos.min() >= 0.98


def test_resolve_backend() -> None:
    assert resolve_backend(DEFAULT_MODEL, "auto") == "onnx"
    assert resolve_backend(f"sentence-transformers/{DEFAULT_MODEL}", "AUTO") == "onnx"
    assert resolve_backend("some/other-model", "auto") == "torch"
    assert resolve_backend(DEFAULT_MODEL, "torch") == "torch"
    assert resolve_backend(DEFAULT_MODEL, "onnx-int8") == "onnx-int8"
    with pytest.raises(ConfigError, match="only the bundled"):
        resolve_backend("some/other-model", "onnx")
    with pytest.raises(ConfigError, match="unknown embedding backend"):
        resolve_backend(DEFAULT_MODEL, "tensorflow")


def test_backend_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sleuth.config import Settings

    monkeypatch.setenv("SLEUTH_EMBEDDING_BACKEND", "torch")
    assert Settings(_env_file=None).embedding_backend == "torch"
    assert resolve_backend(DEFAULT_MODEL) == "torch"
    monkeypatch.setenv("SLEUTH_DATA_DIR", str(tmp_path))
    assert onnx_cache_dir().parent == tmp_path / "models" / "onnx"


def test_auto_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Broken:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise ConfigError("no onnxruntime here")

    class FakeTorch:
        def __init__(self, name: str, batch_size: int) -> None:
            self.name, self.dim = name, 7

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 7), dtype=np.float32)

    monkeypatch.setattr(onnx_embedder, "OnnxEmbedder", Broken)
    monkeypatch.setattr(embeddings, "TorchEmbedder", FakeTorch)
    model = SentenceTransformerEmbedder(backend="auto", data_dir=tmp_path)
    assert (model.backend, model.dim) == ("torch", 7)
    with pytest.raises(ConfigError, match="no onnxruntime here"):
        SentenceTransformerEmbedder(backend="onnx", data_dir=tmp_path)


class _CountingEncoder(onnx_embedder._Encoder):
    """The batching of ``_Encoder.embed`` without a model: a text's tokens are its
    characters, and a pass returns each text's token count in column 0."""

    def __init__(self) -> None:
        self.dim = 2
        self.passes: list[tuple[int, int]] = []  # (texts, padded width) of each pass

    def tokenize(self, texts):  # type: ignore[no-untyped-def]
        return [[1] * len(t) for t in texts]

    def run(self, ids):  # type: ignore[no-untyped-def]
        self.passes.append((len(ids), max(len(x) for x in ids)))
        return np.array([[len(x), 0.0] for x in ids], dtype=np.float32)


def test_passes_hold_at_most_the_token_budget_and_rows_keep_their_order() -> None:
    encoder = _CountingEncoder()
    lengths = [300, 5, 120, 7, 600, 64, 64, 3, 250, 9] * 4
    out = encoder.embed(["x" * n for n in lengths], batch_size=8, max_tokens=512)
    assert out[:, 0].tolist() == lengths  # the order given, whatever the batching
    assert sum(n for n, _ in encoder.passes) == len(lengths)
    for texts, width in encoder.passes:
        assert texts <= 8
        assert texts * width <= 512 or texts == 1  # a text over the budget goes alone
    assert (1, 600) in encoder.passes and (8, 9) in encoder.passes  # short texts still batch
