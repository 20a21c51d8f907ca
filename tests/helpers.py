"""Shared builders for unit tests: a small knowledge base on the hashing test embedder."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sleuth.agents.reasoner import Reasoner
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.service import AgentService
from sleuth.store.catalog import Catalog
from sleuth.types import Chunk, Document, Reference, Section

STATUTE_SECTIONS = {
    "BNS_S100": ("Culpable homicide.", "Whoever causes death by doing an act with the intention "
                 "of causing death commits the offence of culpable homicide."),
    "BNS_S101": ("Murder.", "Except in the cases hereinafter excepted, culpable homicide is "
                 "murder if the act by which the death is caused is done with the intention of "
                 "causing death, as defined in section 100."),
    "BNS_S103": ("Punishment for murder.", "(1) Whoever commits murder shall be punished with "
                 "death or imprisonment for life, and shall also be liable to fine. (2) When a "
                 "group of five or more persons commits murder each member shall be punished "
                 "with death or with imprisonment for life. See section 101."),
    "BNS_S303": ("Theft.", "Whoever, intending to take dishonestly any movable property out of "
                 "the possession of any person without that person's consent, commits theft."),
}  # fmt: skip


def make_document(
    sections: dict[str, tuple[str, str]], doc_id: str = "BNS", title: str = "Test Act"
) -> Document:
    return Document(
        doc_id=doc_id,
        path=f"{doc_id}.json",
        title=title,
        content_hash=str(hash(tuple(sorted(sections.items())))),
        sections=[
            Section(
                title_path=[title, f"Section {sid.split('_S')[-1]}. {t}"], text=x, source_id=sid
            )
            for sid, (t, x) in sections.items()
        ],
    )


def make_app(
    tmp_path: Path,
    sections: dict[str, tuple[str, str]] | None = None,
    reasoner: Reasoner | None = None,
    collection: str = "test",
    index_backend: str = "local",
) -> Sleuth:
    """A sleuth app over a one-document collection, indexed with ``HashingEmbedder``."""
    embedder = HashingEmbedder()
    # plan and critique deterministically: a scripted model's replies are the reasoner's alone
    # (tests of the model-driven planner and critic script them explicitly)
    settings = Settings(
        data_dir=tmp_path,
        embedding_model=embedder.name,
        index_backend=index_backend,
        planner="heuristic",
        reflection="heuristic",
    )
    app = Sleuth(settings, embedder=embedder, reasoner=reasoner)
    app.pipeline.ingest_documents([make_document(sections or STATUTE_SECTIONS)], collection)
    return app


def make_service(
    tmp_path: Path,
    sections: dict[str, tuple[str, str]] | None = None,
    reasoner: Reasoner | None = None,
    collection: str = "test",
    index_backend: str = "local",
) -> AgentService:
    """The agent service of :func:`make_app`."""
    return make_app(tmp_path, sections, reasoner, collection, index_backend).agent


def make_chunks(
    doc_id: str,
    sections: list[tuple[str, int]],
    refs: dict[str, list[tuple[str, str | None]]] | None = None,
) -> list[Chunk]:
    """Chunks for ``sections`` = [(source_id, n_parts)], positions in order, with
    ``refs`` = {source_id: [(target_text, target_id)]}."""
    refs = refs or {}
    out: list[Chunk] = []
    for source_id, n_parts in sections:
        for part in range(n_parts):
            out.append(
                Chunk(
                    chunk_id=f"{source_id}#{part}",
                    source_id=source_id,
                    doc_id=doc_id,
                    title_path=[doc_id, f"Title {source_id}"],
                    text=f"text of {source_id} part {part}",
                    position=len(out),
                    part=part,
                    references=[
                        Reference(source_id=source_id, target_text=t, target_id=g)
                        for t, g in refs.get(source_id, [])
                    ],
                    metadata={"page": part + 1, "nested": {"ok": True}},
                )
            )
    return out


def check_runs_round_trip(catalog: Catalog) -> dict[str, Any]:
    """Run-store scenario shared by the SQLite and PostgreSQL catalog tests; returns run t1."""
    answer = {"text": "Murder is punished [BNS_S103].", "citations": ["BNS_S103"]}
    steps = [{"type": "think", "content": "search"}, {"type": "tool_call", "tool": "rag_search"}]
    catalog.save_run(
        {
            "task_id": "t1",
            "collection": "laws",
            "user_id": "alice",
            "question": "What is murder?",
            "mode": "agent",
            "status": "running",
            "created_at": datetime(2024, 1, 1, tzinfo=UTC),
            "llm": "heuristic",  # unknown key: kept
        }
    )
    catalog.save_run(
        {
            "task_id": "t1",
            "status": "done",
            "answer": answer,
            "steps": steps,
            "trace": {"events": 7, "timings_ms": {"total": 1.5}},
            "finished_at": "2024-01-01T00:00:05+00:00",
        }
    )
    run = catalog.get_run("t1")
    assert run is not None
    assert run["status"] == "done"
    assert run["question"] == "What is murder?"
    assert run["answer"] == answer
    assert run["steps"] == steps
    assert run["trace"] == {"events": 7, "timings_ms": {"total": 1.5}}
    assert run["llm"] == "heuristic"
    assert run["created_at"].tzinfo is not None and run["finished_at"].tzinfo is not None
    assert run["created_at"] == datetime(2024, 1, 1, tzinfo=UTC)
    assert (run["finished_at"] - run["created_at"]).total_seconds() == 5
    assert catalog.get_run("nope") is None

    catalog.save_run(
        {"task_id": "t2", "collection": "laws", "question": "q2", "mode": "rag", "status": "done"}
    )
    catalog.save_run(
        {"task_id": "t3", "collection": "docs", "question": "q3", "mode": "agent", "status": "done"}
    )
    assert [r["task_id"] for r in catalog.list_runs()][:1] == ["t3"]  # newest first
    assert {r["task_id"] for r in catalog.list_runs(collection="laws")} == {"t1", "t2"}
    assert [r["task_id"] for r in catalog.list_runs(user_id="alice")] == ["t1"]
    assert len(catalog.list_runs(limit=2)) == 2
    with pytest.raises(ValueError, match="question"):
        catalog.save_run({"task_id": "t4", "collection": "laws", "mode": "x", "status": "y"})
    with pytest.raises(ValueError, match="task_id"):
        catalog.save_run({"collection": "laws"})
    return run


def check_users_and_owners(catalog: Catalog) -> None:
    """Users, key hashes and collection owners: scenario shared by SQLite and PostgreSQL."""
    from sleuth.errors import UserError

    alice = catalog.add_user("u_a", "alice", "h" * 64)
    bob = catalog.add_user("u_b", "bob", "g" * 64)
    assert alice.name == "alice" and not alice.disabled and alice.created_at.tzinfo is not None
    with pytest.raises(UserError, match="already exists"):
        catalog.add_user("u_c", "alice", "f" * 64)
    assert catalog.user_key_hash("u_a") == (alice, "h" * 64)
    assert catalog.user_key_hash("u_zz") is None
    assert [u.name for u in catalog.list_users()] == ["alice", "bob"]
    for name in ("laws", "notes", "cli"):
        catalog.ensure_collection(name, "m", 8, "local")
    catalog.set_collection_owner("laws", alice.id)
    catalog.set_collection_owner("notes", bob.id)
    assert catalog.collection_owner("laws") == "u_a" and catalog.collection_owner("cli") is None
    assert [c.name for c in catalog.list_collections(owner="u_a")] == ["laws"]
    assert [c.name for c in catalog.list_collections()] == ["cli", "laws", "notes"]
    catalog.set_collection_owner("notes", alice.id)  # reassigned
    assert [c.name for c in catalog.list_collections(owner="u_a")] == ["laws", "notes"]
    catalog.set_collection_owner("notes", None)
    assert catalog.collection_owner("notes") is None
    with pytest.raises(UserError, match="does not exist"):
        catalog.set_collection_owner("nope", alice.id)
    with pytest.raises(UserError, match="no user"):
        catalog.set_collection_owner("laws", "u_nobody")
    assert catalog.delete_collection("laws")
    assert catalog.collection_owner("laws") is None
    catalog.ensure_collection("laws", "m", 8, "local")  # a new collection of the same name
    assert catalog.collection_owner("laws") is None  # does not inherit the old owner
    assert catalog.set_user_disabled("bob").disabled
    assert catalog.get_user("bob") == bob.model_copy(update={"disabled": True})
    assert not catalog.set_user_disabled("bob", False).disabled
    with pytest.raises(UserError, match="no user named"):
        catalog.set_user_disabled("nobody")


_CLAIMER = """
import json, random, sys, time
from sleuth.store.catalog import Catalog
url, me, start, ids = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
catalog = Catalog(url)
random.Random(me).shuffle(ids)
time.sleep(max(0.0, start - time.time()))  # both processes race from the same instant
print(json.dumps([i for i in ids if catalog.claim_job(i, me, "gone-host:1:dead")]))
"""


def check_jobs_claimed_once_by_processes(url: str, n_jobs: int = 40, n_procs: int = 2) -> None:
    """Jobs left by a gone worker, taken over by ``n_procs`` processes racing for each one
    on the catalog at ``url``: every job is claimed by exactly one process."""
    import json
    import subprocess
    import sys
    import time

    catalog = Catalog(url)
    ids = [f"job{i:03d}" for i in range(n_jobs)]
    for job_id in ids:
        catalog.save_job(
            {"job_id": job_id, "collection": "c", "user_id": "u", "state": "queued", "staged": {}}
        )
        catalog.save_job({"job_id": job_id, "worker": "gone-host:1:dead"})
    catalog.close()
    start = time.time() + 4.0  # after every process has imported sleuth and connected
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, url, f"w{p}", str(start), json.dumps(ids)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(n_procs)
    ]
    claimed = [json.loads(proc.communicate(timeout=120)[0]) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    together = [job_id for mine in claimed for job_id in mine]
    assert sorted(together) == ids  # each job once: none twice, none left
    catalog = Catalog(url)
    try:
        for p, mine in enumerate(claimed):
            for job_id in mine:
                assert catalog.get_job(job_id)["worker"] == f"w{p}"  # type: ignore[index]
    finally:
        catalog.close()
