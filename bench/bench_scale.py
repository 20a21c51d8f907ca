"""How ingestion, disk, memory and search latency grow with the corpus: 10k, 100k, 1M chunks.

Corpus (built from the real texts in ``../shared/data``, read in place). The sections of
the four statutes and the 994 HotpotQA paragraphs are split into a pool of sentences
(line breaks and ``. ; ? !`` boundaries; fragments under 5 words dropped, runs over 60
words cut into 40-word pieces). Chunk ``i`` of every corpus is a seeded recombination
(``numpy.random.default_rng(20251130)``): an anchor sentence drawn uniformly from the
pool, then 2-5 more drawn from the 64 pool sentences that follow it (same act or nearby
paragraphs, so a chunk stays on one topic), joined in pool order; ~88 words. Chunks are
spread over synthetic documents of 50 chunks (``doc_id`` ``syn000123``, 25 sections of 2
parts: ``source_id`` ``SYN123_S7``, ``chunk_id`` ``SYN123_S7#1``), title path
``[Synthetic document 123, <title of the anchor's section or paragraph>]``. Each size is
its own seeded draw (the anchors of a smaller corpus are a prefix of a larger one's).

Vectors. Embedding 1M real chunks with all-MiniLM-L6-v2 on 2 cores would take 9-17 hours,
so every pool sentence is embedded once with the real model (cached in
``bench/results/scale/``) and a chunk's vector is the L2-normalised mean of its sentences'
vectors: a stand-in for the model's mean pooling over the whole chunk (the cosine between
the stand-in and the real embedding of the same chunk is measured and printed). The
embedding cost is measured for real on a sample of actual chunk texts
(``Chunk.index_text()``, ``--embed-sample``, batch 64) and extrapolated linearly to each
size; it is shown apart from the index cost, which is measured for real. The query
vectors are real embeddings of the questions (precomputed, so search latency is the
index's own); the query-embedding cost is measured separately.

Per size, each of these runs in its own fresh subprocess (so peak memory does not mix):

* ``baseline``: plain libraries. bm25s (``method="lucene"``, k1 1.5, b 0.75, bm25s'
  tokenizer with English stopwords and PyStemmer) over the same ``index_text()``; exact
  dense ``vectors @ q`` + ``argpartition`` in numpy; hybrid = RRF(60) of their top 50.
* ``local``: :class:`sleuth.store.local_index.LocalIndex`, exact (bm25s + numpy), then the
  same directory reopened with ``ann="hnsw"`` (faiss HNSW, M 32, efConstruction 64):
  graph build time, and dense latency / recall@10 for several ``efSearch`` values.
* ``postgres``: :class:`sleuth.store.postgres_index.PostgresIndex` on a real PostgreSQL 16
  with pgvector 0.6 started from the ``pgserver`` wheel in the work dir (server defaults:
  128 MB shared buffers), loaded inside ``deferred_indexes()`` (the HNSW graph, M 16,
  efConstruction 64, and the postings key built once at the end: timed as its lazy build);
  searches at ``hnsw.ef_search`` 64, then a sweep of efSearch (dense and hybrid latency,
  dense recall@10 against exact).
  Memory: the client's peak RSS, and the server's (the sum of its processes' RSS after the
  queries, shared buffers counted once per process) apart.
* ``milvus``: :class:`sleuth.store.milvus_index.MilvusIndex` on Milvus Lite (a ``.db`` path;
  the dense field has a FLAT index there, BM25 a sparse inverted index); after the inserts
  the collection is flushed (timed) before searching.

Measured: time to add all chunks (``index.add`` in batches of 5,000, vectors
precomputed: chunks/s without embedding), index build work done lazily on the first
search (bm25s for ``local``, the HNSW graph), index size on disk (every file under its
directory), peak RSS (``VmHWM`` of the subprocess; Milvus Lite runs inside it; numpy's
BLAS is pinned to one thread there: a matvec is memory-bound and BLAS threads stall on a
busy machine), then for ``--queries`` questions (half from
``statutes/synthetic_qa.json``, half from ``hotpotqa_train.json``), after 5 warm-up
queries, in one pass: ``search_bm25``, ``search_dense`` and ``search_hybrid`` at k = 10,
timed one by one (p50/p95). Ratios are backend ÷ baseline latency; recall@10 of each
backend's dense top 10 is measured against the exact numpy top 10 (chunk ids), and BM25
overlap@10 against bm25s (tokenisers differ a little).

A backend whose timed queries pass ``--max-query-s`` stops after the current query (at
least 20; the count is printed), and recall is then computed over those queries. A
backend whose inserts pass ``--max-insert-s`` stops there: its search numbers are for
the rows it holds (printed), and its full insert time is extrapolated from the rate so far
(marked ``~``). Outputs: a table per size, a summary, one sentence per size on what
dominates, ``bench/results/scale/scale.json`` (every number) and PNG plots beside it.

    python bench/bench_scale.py [--sizes 10000,100000,1000000] [--backends local,milvus,postgres]
        [--queries 200] [--embed-sample 600] [--max-insert-s 600] [--max-query-s 240]
        [--data-dir DIR]
        [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _common import DATA, RESULTS, load_average, percentile, print_header, table

OUT = RESULTS / "scale"
SEED = 20251130
DOC_CHUNKS = 50
BATCH = 5000
K = 10
WARMUP = 5
EF_SEARCH = (16, 32, 64, 128, 256)
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 64
WINDOW = 64
MODES = ("bm25", "dense", "hybrid")
_SPLIT = re.compile(r"\r?\n+|(?<=[.;?!])\s+")


# ---------------------------------------------------------------------------- corpus


def sentence_pool(data: Path) -> tuple[list[str], list[str]]:
    """(sentences, title of each sentence's section/paragraph), in file order."""
    texts: list[tuple[str, str]] = []
    for path in sorted((data / "statutes").glob("the_*.json")):
        act = json.loads(path.read_text(encoding="utf-8"))
        for sec in act["sections"]:
            title = f"{act['name']} s.{sec['section_number']} {sec['title']}".strip()
            texts.append((title, sec["text"]))
    corpus = json.loads((data / "hotpotqa" / "hotpotqa_train_corpus.json").read_text("utf-8"))
    for title, sentences in corpus.items():
        texts.append((title, " ".join(sentences)))
    pool: list[str] = []
    titles: list[str] = []
    for title, text in texts:
        for part in _SPLIT.split(text):
            words = part.split()
            if len(words) < 5:
                continue
            step = 40 if len(words) > 60 else len(words)
            for i in range(0, len(words), step):
                piece = words[i : i + step]
                if len(piece) >= 5:
                    pool.append(" ".join(piece))
                    titles.append(title)
    return pool, titles


def chunk_plan(size: int, pool_n: int) -> np.ndarray:
    """Pool indices of each chunk's sentences: int32 ``(size, 6)``, -1 = unused slot."""
    rng = np.random.default_rng(SEED)
    anchor = rng.integers(0, pool_n, size)
    others = np.sort(rng.integers(1, WINDOW + 1, (size, 5)), axis=1)
    count = rng.integers(3, 7, size)  # 3..6 sentences
    plan = np.full((size, 6), -1, dtype=np.int64)
    plan[:, 0] = anchor
    plan[:, 1:] = (anchor[:, None] + others) % pool_n
    plan[np.arange(6)[None, :] >= count[:, None]] = -1
    return plan.astype(np.int32)


def chunk_ids(rows: np.ndarray | range) -> list[str]:
    out = []
    for i in rows:
        doc, j = divmod(int(i), DOC_CHUNKS)
        out.append(f"SYN{doc}_S{j // 2}#{j % 2}")
    return out


class Corpus:
    """Chunks, texts and stand-in vectors of corpus rows, built on demand in batches."""

    def __init__(self, pool: list[str], titles: list[str], vecs: np.ndarray, size: int):
        self.pool, self.titles, self.pool_vecs = pool, titles, vecs
        self.size = size
        self.plan = chunk_plan(size, len(pool))

    def texts(self, start: int, stop: int) -> tuple[list[str], list[list[str]]]:
        bodies, paths = [], []
        for i in range(start, stop):
            row = self.plan[i]
            bodies.append(" ".join(self.pool[j] for j in row if j >= 0))
            paths.append([f"Synthetic document {i // DOC_CHUNKS}", self.titles[row[0]]])
        return bodies, paths

    def index_texts(self, start: int, stop: int) -> list[str]:
        bodies, paths = self.texts(start, stop)
        return [f"{' > '.join(p)}\n{b}" for b, p in zip(bodies, paths, strict=True)]

    def chunks(self, start: int, stop: int) -> list[Any]:
        from sleuth.types import Chunk

        bodies, paths = self.texts(start, stop)
        out = []
        for i, body, path in zip(range(start, stop), bodies, paths, strict=True):
            doc, j = divmod(i, DOC_CHUNKS)
            sid = f"SYN{doc}_S{j // 2}"
            out.append(
                Chunk(
                    chunk_id=f"{sid}#{j % 2}",
                    source_id=sid,
                    doc_id=f"syn{doc:06d}",
                    title_path=path,
                    text=body,
                    position=j,
                    part=j % 2,
                )
            )
        return out

    def vectors(self, start: int, stop: int) -> np.ndarray:
        plan = self.plan[start:stop]
        mask = plan >= 0
        summed = (self.pool_vecs[np.where(mask, plan, 0)] * mask[..., None]).sum(axis=1)
        summed /= np.linalg.norm(summed, axis=1, keepdims=True)
        return summed.astype(np.float32)

    def batches(self, batch: int = BATCH) -> Iterator[tuple[int, int]]:
        for start in range(0, self.size, batch):
            yield start, min(start + batch, self.size)


# ---------------------------------------------------------------------------- child


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mb() -> float:
    """Peak RSS of this process image (``VmHWM``; ``ru_maxrss`` would keep the parent's
    peak across fork + exec)."""
    peak = _status_mb("VmHWM")
    if peak != peak:  # not Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return peak


def rss_mb() -> float:
    return _status_mb("VmRSS")


def disk_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total / 1e6


def timed_queries(
    fns: dict[str, Callable[[int], list[str]]], n_queries: int, budget_s: float = float("inf")
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]]]:
    """Latencies (ms) and top-k ids per mode; modes rotate so drift hits all alike.

    Stops after the query during which ``budget_s`` ran out (at least 20 queries), so
    every mode has the same first queries.
    """
    names = list(fns)
    t_end = time.perf_counter() + budget_s
    for i in range(min(WARMUP, n_queries)):
        for name in names:
            fns[name](i)
    times: dict[str, list[float]] = {n: [] for n in names}
    ids: dict[str, list[list[str]]] = {n: [] for n in names}
    for i in range(n_queries):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            got = fns[name](i)
            times[name].append((time.perf_counter() - t0) * 1000)
            ids[name].append(got)
        if i + 1 >= 20 and time.perf_counter() > t_end:
            break
    return times, ids


def lat_stats(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    gc.disable()  # no collector pauses inside timed sections; memory is ample
    pool_vecs = np.load(spec["pool_vectors"])
    pool, titles = sentence_pool(Path(spec["data"]))
    qdata = json.loads(Path(spec["queries"]).read_text(encoding="utf-8"))
    qtexts: list[str] = qdata["texts"]
    qvecs = np.load(spec["query_vectors"])
    corpus = Corpus(pool, titles, pool_vecs, spec["size"])
    work = Path(spec["work"])
    backend = spec["backend"]
    res: dict[str, Any] = {"backend": backend, "size": spec["size"]}
    base_rss = rss_mb()
    res["rss_start_mb"] = base_rss
    if backend == "baseline":
        res.update(_child_baseline(corpus, qtexts, qvecs, work))
    else:
        res.update(
            _child_index(
                backend, corpus, qtexts, qvecs, work, spec["max_insert_s"], spec["max_query_s"]
            )
        )
    # local: the peak of the exact phase; the peak with the HNSW graph is res["ann"]
    res["peak_rss_mb"] = res.get("peak_rss_exact_mb", peak_rss_mb())
    return res


def _child_baseline(
    corpus: Corpus, qtexts: list[str], qvecs: np.ndarray, work: Path
) -> dict[str, Any]:
    import bm25s
    import Stemmer

    from sleuth.store.index import rrf_fuse
    from sleuth.types import Chunk, Hit

    stemmer = Stemmer.Stemmer("english")
    out: dict[str, Any] = {}
    gen_s = 0.0
    texts: list[str] = []
    vec_parts = []
    for start, stop in corpus.batches():
        t0 = time.perf_counter()
        texts.extend(corpus.index_texts(start, stop))
        vec_parts.append(corpus.vectors(start, stop))
        gen_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    vecs = np.concatenate(vec_parts)
    del vec_parts
    dense_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    tok_s = time.perf_counter() - t0
    del texts
    t0 = time.perf_counter()
    bm25 = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    bm25.index(tokens, show_progress=False)
    index_s = time.perf_counter() - t0
    del tokens
    gc.collect()
    n = corpus.size
    out.update(
        rows=n,
        gen_s=gen_s,
        insert_s=dense_s + tok_s + index_s,
        parts={"bm25s tokenize": tok_s, "bm25s index": index_s, "stack vectors": dense_s},
        partial=False,
    )
    d = work / "baseline"
    bm25.save(str(d / "bm25s"), show_progress=False)
    np.save(d / "vectors.npy", vecs)
    out["disk_mb"] = disk_mb(d)
    shutil.rmtree(d, ignore_errors=True)

    def bm25_rows(i: int, k: int) -> list[tuple[int, float]]:
        q = bm25s.tokenize(
            [qtexts[i]], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        if not q[0]:
            return []
        rows, scores = bm25.retrieve(q, k=min(k, n), show_progress=False, n_threads=0)
        return [(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if s > 0]

    def dense_rows(i: int, k: int) -> list[tuple[int, float]]:
        scores = vecs @ qvecs[i]
        top = np.argpartition(-scores, k)[:k] if n > k else np.arange(n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(r), float(scores[r])) for r in top]

    def as_hits(rows: list[tuple[int, float]]) -> list[Hit]:
        ids = chunk_ids([r for r, _ in rows])
        return [
            Hit(
                chunk=Chunk(
                    chunk_id=c, source_id="", doc_id="", title_path=[], text="", position=0
                ),
                score=s,
                rank=j,
                retriever="dense",
            )
            for j, (c, (_, s)) in enumerate(zip(ids, rows, strict=True), start=1)
        ]

    def hybrid(i: int) -> list[str]:
        fused = rrf_fuse([as_hits(bm25_rows(i, 50)), as_hits(dense_rows(i, 50))], K)
        return [h.chunk.chunk_id for h in fused]

    fns = {
        "bm25": lambda i: chunk_ids([r for r, _ in bm25_rows(i, K)]),
        "dense": lambda i: chunk_ids([r for r, _ in dense_rows(i, K)]),
        "hybrid": hybrid,
    }
    times, ids = timed_queries(fns, len(qtexts))
    out["latency"] = {m: lat_stats(times[m]) for m in MODES}
    out["queries"] = len(times["bm25"])
    out["ids"] = ids
    out["rss_mb"] = rss_mb()
    return out


def _child_index(
    backend: str,
    corpus: Corpus,
    qtexts: list[str],
    qvecs: np.ndarray,
    work: Path,
    max_insert_s: float,
    max_query_s: float,
) -> dict[str, Any]:
    dim = corpus.pool_vecs.shape[1]
    deferred: Any = None
    server: Any = None
    if backend == "local":
        from sleuth.store.local_index import LocalIndex

        path = work / "local"
        index: Any = LocalIndex(path, dim)
    elif backend == "postgres":
        import pgserver

        from sleuth.store.postgres_index import PostgresIndex

        path = work / "pg"
        server = pgserver.get_server(path, cleanup_mode="stop")
        index = PostgresIndex(server.get_uri(), "scale", dim)
        deferred = index.deferred_indexes(work_mem="4GB")
        deferred.__enter__()
    else:
        from sleuth.store.milvus_index import MilvusIndex

        path = work / "milvus.db"
        index = MilvusIndex(str(path), "scale", dim)
    out: dict[str, Any] = {}
    gen_s = insert_s = 0.0
    rows = 0
    partial = False
    for start, stop in corpus.batches():
        t0 = time.perf_counter()
        chunks = corpus.chunks(start, stop)
        vecs = corpus.vectors(start, stop)
        gen_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        index.add(chunks, vecs)
        insert_s += time.perf_counter() - t0
        rows = stop
        if insert_s > max_insert_s and rows < corpus.size:
            partial = True
            break
    del chunks, vecs
    parts: dict[str, float] = {"add": insert_s}
    if deferred is not None:
        t0 = time.perf_counter()
        deferred.__exit__(None, None, None)
        parts["index build"] = time.perf_counter() - t0
    if backend == "milvus":
        t0 = time.perf_counter()
        index._client.flush(index.name)
        parts["flush"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    held = index.count()
    parts["count"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.search_bm25(qtexts[0], K)  # local: builds the bm25s index (lazy)
    parts["first bm25 search"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.search_dense(qvecs[0], K)
    parts["first dense search"] = time.perf_counter() - t0
    out.update(rows=rows, held=held, gen_s=gen_s, insert_s=insert_s, parts=parts)
    out["partial"] = partial
    out["disk_mb"] = disk_mb(path)

    def ids(hits: list[Any]) -> list[str]:
        return [h.chunk.chunk_id for h in hits]

    fns = {
        "bm25": lambda i: ids(index.search_bm25(qtexts[i], K)),
        "dense": lambda i: ids(index.search_dense(qvecs[i], K)),
        "hybrid": lambda i: ids(index.search_hybrid(qtexts[i], qvecs[i], K)),
    }
    times, got = timed_queries(fns, len(qtexts), max_query_s)
    out["latency"] = {m: lat_stats(times[m]) for m in MODES}
    out["queries"] = len(times["bm25"])
    out["ids"] = got
    out["rss_mb"] = rss_mb()
    out["peak_rss_exact_mb"] = peak_rss_mb()
    if backend == "postgres":
        out["ann"] = _postgres_sweep(index, qtexts, qvecs, parts["index build"])
        out["server_rss_mb"] = _server_rss_mb(path)
    index.close()
    if server is not None:
        server.cleanup()
    if backend == "local":
        out["ann"] = _child_hnsw(path, dim, qtexts, qvecs, got["dense"])
    return out


def _postgres_sweep(
    index: Any, qtexts: list[str], qvecs: np.ndarray, build_s: float
) -> dict[str, Any]:
    """Dense (and at 64 hybrid) latency per ``hnsw.ef_search``; recall is added later
    against the baseline's exact top 10."""
    from sleuth.store.postgres_index import HNSW_EF_CONSTRUCTION, HNSW_M

    out: dict[str, Any] = {
        "build_s": build_s,
        "m": HNSW_M,
        "ef_construction": HNSW_EF_CONSTRUCTION,
        "sweep": [],
    }
    for ef in (40, 64, 128, 256):
        index.ef_search = ef
        fns = {
            "dense": lambda i: [h.chunk.chunk_id for h in index.search_dense(qvecs[i], K)],
            "hybrid": lambda i: [
                h.chunk.chunk_id for h in index.search_hybrid(qtexts[i], qvecs[i], K)
            ],
        }
        times, got = timed_queries(fns, len(qtexts))
        out["sweep"].append(
            {
                "ef_search": ef,
                "dense": lat_stats(times["dense"]),
                "hybrid": lat_stats(times["hybrid"]),
                "ids": got["dense"],
            }
        )
    out["peak_rss_mb"] = peak_rss_mb()
    index.ef_search = 64
    return out


def _server_rss_mb(data_dir: Path) -> float:
    """Sum of the RSS of the PostgreSQL processes serving ``data_dir`` (MB)."""
    import psutil

    total = 0
    for proc in psutil.process_iter(["cmdline", "memory_info"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "postgres" in cmd and str(data_dir) in cmd:
            total += proc.info["memory_info"].rss
            for child in proc.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    total += child.memory_info().rss
    return total / 1e6


def _child_hnsw(
    path: Path, dim: int, qtexts: list[str], qvecs: np.ndarray, exact: list[list[str]]
) -> dict[str, Any]:
    from sleuth.store.local_index import LocalIndex

    gc.collect()
    t0 = time.perf_counter()
    index = LocalIndex(path, dim, ann="hnsw", hnsw_m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION)
    n = index.count()
    reopen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.ensure_ann()
    build_s = time.perf_counter() - t0
    out: dict[str, Any] = {
        "reopen_s": reopen_s,
        "build_s": build_s,
        "m": HNSW_M,
        "ef_construction": HNSW_EF_CONSTRUCTION,
        "rows": n,
        "sweep": [],
    }
    for ef in EF_SEARCH:
        index.ef_search = ef
        fns = {"dense": lambda i: [h.chunk.chunk_id for h in index.search_dense(qvecs[i], K)]}
        if ef == 64:
            fns["hybrid"] = lambda i: [
                h.chunk.chunk_id for h in index.search_hybrid(qtexts[i], qvecs[i], K)
            ]
        times, got = timed_queries(fns, len(qtexts))
        row: dict[str, Any] = {"ef_search": ef, "dense": lat_stats(times["dense"])}
        row["recall_vs_local_exact"] = recall(got["dense"], exact)
        row["ids"] = got["dense"]
        if "hybrid" in fns:
            row["hybrid"] = lat_stats(times["hybrid"])
            row["hybrid_ids"] = got["hybrid"]
        out["sweep"].append(row)
    out["peak_rss_mb"] = peak_rss_mb()
    index.close()
    return out


def recall(got: list[list[str]], want: list[list[str]]) -> float:
    """Mean share of ``want``'s ids found in ``got``, over the queries both measured."""
    vals = [len(set(g) & set(w)) / len(w) for g, w in zip(got, want, strict=False) if w]
    return float(np.mean(vals)) if vals else float("nan")


# ---------------------------------------------------------------------------- parent


def load_queries(n: int) -> list[str]:
    import random

    statutes = json.loads((DATA / "statutes" / "synthetic_qa.json").read_text("utf-8"))
    hotpot = json.loads((DATA / "hotpotqa" / "hotpotqa_train.json").read_text("utf-8"))
    n_hot = min(len(hotpot), n // 2)
    sample = random.Random(SEED).sample(range(len(statutes)), n - n_hot)
    qs = [statutes[i]["instruction"] for i in sample] + [q["question"] for q in hotpot[:n_hot]]
    return [qs[i] for i in random.Random(SEED + 1).sample(range(len(qs)), len(qs))]


def embed_all(embedder: Any, texts: list[str], batch: int = 256) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    parts = [embedder.embed(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    return np.concatenate(parts), time.perf_counter() - t0


def pool_vectors(embedder: Any, pool: list[str]) -> tuple[Path, str]:
    digest = hashlib.sha1(("\n".join(pool) + embedder.name).encode("utf-8")).hexdigest()[:12]
    path = OUT / f"sentence_vectors-{digest}.npy"
    if path.exists():
        return path, f"cached ({path.name})"
    vecs, secs = embed_all(embedder, pool)
    np.save(path, vecs.astype(np.float32))
    return path, f"embedded now: {len(pool)} sentences in {secs:.0f} s ({path.name})"


def run_one(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    spec_path = Path(spec["work"]) / "spec.json"
    res_path = Path(spec["work"]) / "result.json"
    spec_path.write_text(json.dumps({**spec, "result": str(res_path)}), encoding="utf-8")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(spec_path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            # numpy's BLAS on one thread: a matvec is memory-bound, and BLAS threads stall
            # for ms on a busy 2-core machine (faiss keeps its OpenMP threads).
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s", "wall_s": timeout_s}
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not res_path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}", "wall_s": wall}
    res = json.loads(res_path.read_text(encoding="utf-8"))
    res["wall_s"] = wall
    res["load_after"] = load_average()
    return res


def fmt_n(n: float) -> str:
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k" if n >= 1e3 else str(int(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="corpus sizes (chunks)")
    parser.add_argument(
        "--backends",
        default="local,milvus,postgres",
        help="index backends beside the baseline (local, milvus, postgres)",
    )
    parser.add_argument("--queries", type=int, default=200, help="questions timed per mode")
    parser.add_argument("--embed-sample", type=int, default=600, help="chunks embedded for real")
    parser.add_argument(
        "--max-insert-s", type=float, default=600, help="stop inserting after this (extrapolate)"
    )
    parser.add_argument(
        "--max-query-s",
        type=float,
        default=240,
        help="per backend and size, stop the timed queries after this (>= 20 queries)",
    )
    parser.add_argument("--data-dir", default=str(DATA), help="the shared data folder")
    parser.add_argument("--work-dir", help="where indexes are built (default: a temp dir)")
    args = parser.parse_args()
    if args.child:
        spec = json.loads(Path(args.child).read_text(encoding="utf-8"))
        res = run_child(spec)
        Path(spec["result"]).write_text(json.dumps(res), encoding="utf-8")
        return

    sizes = [int(s) for s in args.sizes.split(",") if s]
    backends = [b for b in args.backends.split(",") if b]
    data = Path(args.data_dir).resolve()
    OUT.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    pool, _ = sentence_pool(data)
    words = np.mean([len(s.split()) for s in pool])
    print_header(
        "bench_scale: ingestion, disk, memory and search latency vs corpus size",
        [
            (
                "sizes / backends",
                f"{', '.join(map(fmt_n, sizes))} / baseline, {', '.join(backends)}",
            ),
            ("sentence pool", f"{len(pool)} sentences ({words:.1f} words each) from {data}"),
            ("queries", f"{args.queries} questions, k={K}, {WARMUP} warm-up, per mode"),
            ("insert limit", f"{args.max_insert_s:.0f} s per backend and size, then extrapolate"),
        ],
    )
    from sleuth.retrieval.embeddings import get_embedder

    embedder = get_embedder()
    embedder.embed(["warm-up"])
    pool_path, how = pool_vectors(embedder, pool)
    print(f"sentence vectors: {how}")
    qtexts = load_queries(args.queries)
    qvecs, _ = embed_all(embedder, qtexts)
    q_times = []
    for q in qtexts[:40]:
        t0 = time.perf_counter()
        embedder.embed([q])
        q_times.append((time.perf_counter() - t0) * 1000)
    q_embed = lat_stats(q_times)
    # Real embedding throughput on actual chunk texts, and how close the stand-in is.
    sample = Corpus(pool, sentence_pool(data)[1], np.load(pool_path), max(args.embed_sample, 1))
    texts = sample.index_texts(0, sample.size)
    real, embed_s = embed_all(embedder, texts)
    embed_rate = sample.size / embed_s
    cos = float(np.mean(np.sum(real * sample.vectors(0, sample.size), axis=1)))
    n_words = float(np.mean([len(t.split()) for t in texts]))
    print(
        f"embedding: {sample.size} real chunks ({n_words:.0f} words each) in {embed_s:.1f} s = "
        f"{embed_rate:.1f} chunks/s; stand-in vs real embedding cosine mean {cos:.3f}; "
        f"query embedding p50 {q_embed['p50']:.1f} ms, p95 {q_embed['p95']:.1f} ms"
    )
    del embedder, real
    gc.collect()
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-scale-", dir=args.work_dir) as tmp:
        qpath = Path(tmp) / "queries.json"
        qpath.write_text(json.dumps({"texts": qtexts}), encoding="utf-8")
        qvpath = Path(tmp) / "query_vectors.npy"
        np.save(qvpath, qvecs)
        results: dict[int, dict[str, Any]] = {}
        for size in sizes:
            results[size] = {}
            for backend in ["baseline", *backends]:
                work = Path(tmp) / f"{backend}-{size}"
                work.mkdir()
                spec = {
                    "size": size,
                    "backend": backend,
                    "work": str(work),
                    "data": str(data),
                    "pool_vectors": str(pool_path),
                    "queries": str(qpath),
                    "query_vectors": str(qvpath),
                    "max_insert_s": args.max_insert_s,
                    "max_query_s": args.max_query_s,
                }
                print(f"[{time.strftime('%H:%M:%S')}] {fmt_n(size)} {backend} ...", flush=True)
                res = run_one(spec, timeout_s=args.max_insert_s * 3 + args.max_query_s + 1800)
                shutil.rmtree(work, ignore_errors=True)
                results[size][backend] = res
                print(f"    {short_line(res)}", flush=True)
                # every result so far, in case the run is stopped before the end
                (OUT / "scale-partial.json").write_text(
                    json.dumps({str(k): v for k, v in results.items()}), encoding="utf-8"
                )
            print()
            print(size_table(size, results[size], embed_rate))
            print()
    total_s = time.perf_counter() - t_start
    report = build_report(results, embed_rate, q_embed, cos, n_words, len(pool), total_s, args)
    print(summary(report))
    (OUT / "scale.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    plots = make_plots(report)
    print(f"\nwrote {OUT / 'scale.json'}" + "".join(f", {p.name}" for p in plots))
    print(f"total wall time {total_s / 60:.1f} min; load average now {load_average()}")


def short_line(res: dict[str, Any]) -> str:
    if "error" in res:
        return f"ERROR {res['error']}"
    lat = res["latency"]
    part = f" (stopped at {res['rows']} rows)" if res.get("partial") else ""
    part += f"; {res['queries']} queries" if "queries" in res else ""
    return (
        f"add {res['insert_s']:.1f} s{part}; disk {res['disk_mb']:.0f} MB; peak RSS "
        f"{res['peak_rss_mb']:.0f} MB"
        + (f" (server {res['server_rss_mb']:.0f} MB)" if "server_rss_mb" in res else "")
        + f"; p50 bm25/dense/hybrid {lat['bm25']['p50']:.2f} / "
        f"{lat['dense']['p50']:.2f} / {lat['hybrid']['p50']:.2f} ms; wall {res['wall_s']:.0f} s"
    )


def derived(
    size: int, res: dict[str, Any], base: dict[str, Any] | None, embed_rate: float
) -> dict[str, Any]:
    """Per backend: throughput, extrapolation, ratios and recall against the baseline."""
    rows = res["rows"]
    build = sum(v for k, v in res["parts"].items() if k.startswith("first") or k == "index build")
    rate = rows / res["insert_s"] if res["insert_s"] > 0 else float("inf")
    full_insert = size / rate
    embed_est = size / embed_rate
    d: dict[str, Any] = {
        "rows_measured": rows,
        "partial": res.get("partial", False),
        "insert_chunks_per_s": rate,
        "insert_s_full": full_insert,
        "lazy_build_s": build,
        "embed_s_est": embed_est,
        "ingest_chunks_per_s_with_embedding_est": size / (embed_est + full_insert + build),
    }
    if base and "error" not in base and res is not base:
        same_n = base["rows"] == rows
        d["ratio_p50"] = {m: res["latency"][m]["p50"] / base["latency"][m]["p50"] for m in MODES}
        if same_n:
            d["dense_recall_at10_vs_exact"] = recall(res["ids"]["dense"], base["ids"]["dense"])
            d["bm25_overlap_at10_vs_bm25s"] = recall(res["ids"]["bm25"], base["ids"]["bm25"])
            d["hybrid_overlap_at10_vs_plain_rrf"] = recall(
                res["ids"]["hybrid"], base["ids"]["hybrid"]
            )
            if "ann" in res:
                for row in res["ann"]["sweep"]:
                    row["recall_vs_numpy_exact"] = recall(row["ids"], base["ids"]["dense"])
    return d


def size_table(size: int, per: dict[str, dict[str, Any]], embed_rate: float) -> str:
    base = per.get("baseline")
    rows = []
    for name, res in per.items():
        if "error" in res:
            rows.append([name, res["error"], *[""] * 10])
            continue
        d = derived(size, res, base, embed_rate)
        res["derived"] = d
        lat = res["latency"]
        mark = "~" if d["partial"] else ""
        ratio = d.get("ratio_p50", {})
        fewer = base and "error" not in base and res["queries"] < base["queries"]
        rows.append(
            [
                name
                + (f" ({fmt_n(res['rows'])} rows)" if d["partial"] else "")
                + (f" [{res['queries']} q]" if fewer else ""),
                f"{mark}{d['insert_chunks_per_s']:.0f}",
                f"{mark}{d['insert_s_full']:.1f}",
                round(d["lazy_build_s"], 2),
                round(res["disk_mb"], 1),
                round(res["peak_rss_mb"], 0),
                *[f"{lat[m]['p50']:.2f} / {lat[m]['p95']:.2f}" for m in MODES],
                " / ".join(f"{ratio[m]:.2f}" for m in MODES) if ratio else "1",
                _fmt(d.get("dense_recall_at10_vs_exact"), 1.0 if name == "baseline" else None),
                _fmt(d.get("bm25_overlap_at10_vs_bm25s"), 1.0 if name == "baseline" else None),
            ]
        )
        for row in (res.get("ann") or {}).get("sweep", []):
            rows.append(
                [
                    f"  {name} hnsw ef={row['ef_search']}",
                    "",
                    "",
                    round(res["ann"]["build_s"], 1) if row["ef_search"] == EF_SEARCH[0] else "",
                    "",
                    round(res["ann"]["peak_rss_mb"], 0) if row["ef_search"] == EF_SEARCH[0] else "",
                    "",
                    f"{row['dense']['p50']:.2f} / {row['dense']['p95']:.2f}",
                    f"{row['hybrid']['p50']:.2f} / {row['hybrid']['p95']:.2f}"
                    if "hybrid" in row
                    else "",
                    ""
                    if not base or "error" in base
                    else f"- / {row['dense']['p50'] / base['latency']['dense']['p50']:.2f} / "
                    + (
                        f"{row['hybrid']['p50'] / base['latency']['hybrid']['p50']:.2f}"
                        if "hybrid" in row
                        else "-"
                    ),
                    _fmt(row.get("recall_vs_numpy_exact")),
                    "",
                ]
            )
    headers = [
        "backend",
        "add chunks/s",
        "add s",
        "lazy build s",
        "disk MB",
        "peak RSS MB",
        "bm25 p50/p95 ms",
        "dense p50/p95 ms",
        "hybrid p50/p95 ms",
        "p50 ÷ baseline b/d/h",
        "dense R@10",
        "bm25 ov@10",
    ]
    emb = size / embed_rate
    note = (
        f"embedding {fmt_n(size)} chunks with the real model: ~{emb:.0f} s "
        f"(~{emb / 3600:.2f} h) at {embed_rate:.1f} chunks/s (extrapolated, not in 'add s'); "
        "~ = extrapolated from a partial insert; lazy build = first BM25 + first dense search "
        "(local: bm25s index; hnsw row: graph build)"
    )
    return table(headers, rows, title=f"{fmt_n(size)} chunks") + "\n" + note


def _fmt(value: float | None, default: float | None = None) -> str:
    value = default if value is None else value
    return "" if value is None else f"{value:.3f}"


def build_report(
    results: dict[int, dict[str, Any]],
    embed_rate: float,
    q_embed: dict[str, float],
    cos: float,
    n_words: float,
    pool_n: int,
    total_s: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    from _common import machine_facts

    for per in results.values():  # ids are big and only needed for recall
        for res in per.values():
            res.pop("ids", None)
            for row in (res.get("ann") or {}).get("sweep", []):
                row.pop("ids", None)
                row.pop("hybrid_ids", None)
    return {
        "machine": dict(machine_facts()),
        "args": vars(args),
        "pool_sentences": pool_n,
        "chunk_words_mean": n_words,
        "embed_chunks_per_s": embed_rate,
        "standin_vs_real_cosine_mean": cos,
        "query_embedding_ms": q_embed,
        "total_wall_s": total_s,
        "results": {str(k): v for k, v in results.items()},
    }


def fmt_s(secs: float) -> str:
    if secs >= 3600:
        return f"{secs / 3600:.1f} h"
    return f"{secs / 60:.1f} min" if secs >= 60 else f"{secs:.1f} s"


def dominates(size: int, per: dict[str, Any], embed_rate: float) -> str:
    """One sentence on what dominates the cost at this size (from the measured numbers)."""
    loc = per.get("local")
    if not loc or "error" in loc:
        return f"{fmt_n(size)}: local backend not measured."
    d = loc["derived"]
    emb, add, build = d["embed_s_est"], d["insert_s_full"], d["lazy_build_s"]
    lat = loc["latency"]
    leg = "dense" if lat["dense"]["p50"] > lat["bm25"]["p50"] else "bm25"
    vec_mb = size * 384 * 4 / 1e6
    text = (
        f"{fmt_n(size)}: ingestion is dominated by embedding (~{fmt_s(emb)} est. vs "
        f"{fmt_s(add + build)} of index work, {emb / (emb + add + build):.0%}); local "
        f"hybrid p50 {lat['hybrid']['p50']:.1f} ms is led by the {leg} leg "
        f"(bm25 {lat['bm25']['p50']:.1f} ms, exact dense {lat['dense']['p50']:.1f} ms)"
    )
    ann = loc.get("ann")
    if ann:
        row = next(r for r in ann["sweep"] if r["ef_search"] == 64)
        text += (
            f", HNSW ef=64 brings dense to {row['dense']['p50']:.2f} ms "
            f"(recall@10 {row.get('recall_vs_numpy_exact', float('nan')):.3f})"
        )
    text += (
        f"; local peak RSS {loc['peak_rss_mb'] / 1e3:.1f} GB of which the float32 vectors "
        f"are {vec_mb / 1e3:.2f} GB"
    )
    mil = per.get("milvus")
    if mil and "error" not in mil:
        text += (
            f"; Milvus Lite inserts at {mil['derived']['insert_chunks_per_s']:.0f} chunks/s "
            f"(~{fmt_s(mil['derived']['insert_s_full'])}"
            f"{' extrapolated' if mil['derived']['partial'] else ''}), hybrid p50 "
            f"{mil['latency']['hybrid']['p50']:.1f} ms"
        )
    return text + "."


def summary(report: dict[str, Any]) -> str:
    rows = []
    res_all = report["results"]
    for size_s, per in res_all.items():
        for name, res in per.items():
            if "error" in res:
                rows.append([fmt_n(int(size_s)), name, res["error"], "", "", "", "", "", ""])
                continue
            d = res.get("derived", {})
            lat = res["latency"]
            rows.append(
                [
                    fmt_n(int(size_s)),
                    name
                    + (f" @{fmt_n(res['rows'])}" if res.get("partial") else "")
                    + (
                        f" [{res['queries']} q]"
                        if res["queries"] < report["args"]["queries"]
                        else ""
                    ),
                    ("~" if res.get("partial") else "") + f"{d.get('insert_chunks_per_s', 0):.0f}",
                    round(res["disk_mb"], 0),
                    round(res["peak_rss_mb"], 0),
                    *[f"{lat[m]['p50']:.2f}/{lat[m]['p95']:.2f}" for m in MODES],
                    _fmt(d.get("dense_recall_at10_vs_exact"), 1.0 if name == "baseline" else None),
                ]
            )
            ann = res.get("ann")
            if ann:
                row = next(r for r in ann["sweep"] if r["ef_search"] == 64)
                rows.append(
                    [
                        fmt_n(int(size_s)),
                        f"{name}+hnsw ef64" if name == "local" else f"{name} ef64 (above)",
                        f"build {ann['build_s']:.0f} s",
                        "",
                        round(ann["peak_rss_mb"], 0),
                        f"{lat['bm25']['p50']:.2f}/{lat['bm25']['p95']:.2f}",
                        f"{row['dense']['p50']:.2f}/{row['dense']['p95']:.2f}",
                        f"{row['hybrid']['p50']:.2f}/{row['hybrid']['p95']:.2f}",
                        _fmt(row.get("recall_vs_numpy_exact")),
                    ]
                )
    headers = [
        "size",
        "backend",
        "add chunks/s",
        "disk MB",
        "peak RSS MB",
        "bm25 p50/p95",
        "dense p50/p95",
        "hybrid p50/p95",
        "dense R@10",
    ]
    out = [table(headers, rows, title="Summary (latency in ms, k=10; embedding excluded)")]
    out.append(
        f"embedding (real model, measured on {report['args']['embed_sample']} chunks of "
        f"{report['chunk_words_mean']:.0f} words): {report['embed_chunks_per_s']:.1f} chunks/s"
        f" -> 10k: {1e4 / report['embed_chunks_per_s'] / 60:.0f} min, 100k: "
        f"{1e5 / report['embed_chunks_per_s'] / 3600:.1f} h, 1M: "
        f"{1e6 / report['embed_chunks_per_s'] / 3600:.1f} h (extrapolated); query embedding "
        f"p50 {report['query_embedding_ms']['p50']:.1f} ms on top of dense/hybrid latency"
    )
    out.append("\nWhat dominates:")
    for size_s, per in res_all.items():
        out.append("- " + dominates(int(size_s), per, report["embed_chunks_per_s"]))
    return "\n".join(out)


def make_plots(report: dict[str, Any]) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plots)")
        return []
    res_all = report["results"]
    series: dict[str, list[tuple[int, float]]] = {}
    mem: dict[str, list[tuple[int, float]]] = {}
    disk: dict[str, list[tuple[int, float]]] = {}
    for per in res_all.values():
        for name, res in per.items():
            if "error" in res:
                continue
            n = res["rows"]
            for m in MODES:
                series.setdefault(f"{name} {m}", []).append((n, res["latency"][m]["p50"]))
            mem.setdefault(name, []).append((n, res["peak_rss_mb"]))
            disk.setdefault(name, []).append((n, res["disk_mb"]))
            ann = res.get("ann")
            if ann:
                row = next(r for r in ann["sweep"] if r["ef_search"] == 64)
                series.setdefault("local+hnsw(ef64) dense", []).append((n, row["dense"]["p50"]))
                series.setdefault("local+hnsw(ef64) hybrid", []).append((n, row["hybrid"]["p50"]))
                mem.setdefault("local+hnsw", []).append((n, ann["peak_rss_mb"]))
    paths = []
    styles = {"bm25": ":", "dense": "--", "hybrid": "-"}
    fig, ax = plt.subplots(figsize=(9, 6))
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            styles[label.split()[-1]],
            marker="o",
            label=label,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the index")
    ax.set_ylabel("p50 latency per query, ms (k=10, query embedding excluded)")
    ax.set_title("Search latency vs corpus size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    paths.append(OUT / "latency_vs_size.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, data_, ylabel in ((axes[0], mem, "peak RSS, MB"), (axes[1], disk, "index on disk, MB")):
        for label, pts in sorted(data_.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks in the index")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title("Peak memory vs corpus size")
    axes[1].set_title("Disk vs corpus size")
    fig.tight_layout()
    paths.append(OUT / "memory_disk_vs_size.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    # latency/recall trade-off of HNSW at the largest size with local results
    largest = max(
        (int(s) for s, per in res_all.items() if "ann" in per.get("local", {})), default=None
    )
    if largest is not None:
        local = res_all[str(largest)]["local"]
        sweep = local["ann"]["sweep"]
        fig, ax = plt.subplots(figsize=(7, 5))
        xs = [r["dense"]["p50"] for r in sweep]
        ys = [r.get("recall_vs_numpy_exact", r["recall_vs_local_exact"]) for r in sweep]
        ax.plot(xs, ys, marker="o", label="local + HNSW (efSearch)")
        for r, x, y in zip(sweep, xs, ys, strict=True):
            ax.annotate(f"ef={r['ef_search']}", (x, y), fontsize=8)
        ax.plot([local["latency"]["dense"]["p50"]], [1.0], "s", label="local exact")
        base = res_all[str(largest)].get("baseline", {})
        if "latency" in base:
            ax.plot([base["latency"]["dense"]["p50"]], [1.0], "^", label="numpy exact")
        ax.set_xscale("log")
        ax.set_xlabel("dense p50 latency, ms")
        ax.set_ylabel("recall@10 vs exact")
        ax.set_title(f"HNSW latency/recall at {fmt_n(local['rows'])} chunks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        paths.append(OUT / "hnsw_tradeoff.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    return paths


if __name__ == "__main__":
    main()
