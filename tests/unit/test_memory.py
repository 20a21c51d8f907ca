"""Agent memory: per-user recall of past runs, never across users, never citable."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from sleuth.agents.answer import Citation, GeneratedAnswer
from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.errors import ToolError, UserError
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.memory import ANONYMOUS, AgentMemory, memory_doc_id, memory_index_name, user_key
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.store.factory import open_internal_index
from sleuth.tools.base import RunContext
from sleuth.tools.memory import build_memory_tools
from tests.helpers import make_app

MURDER = "What is the punishment for murder?"
THEFT = "What is theft of movable property?"


def _answer(text: str, *ids: str, insufficient: bool = False) -> GeneratedAnswer:
    return GeneratedAnswer(
        answer_text=text,
        citations=[Citation(source_id=i) for i in ids],
        is_insufficient_context=insufficient,
    )


def _final(text: str, citations: list[str]) -> AIMessage:
    args = {"answer_text": text, "citations": citations, "is_insufficient_context": False}
    return tool_call("final_answer", args)


def _ids(memories) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.task_id for m in memories]


@pytest.fixture(params=["local", "milvus"])
def app(request: pytest.FixtureRequest, tmp_path):  # type: ignore[no-untyped-def]
    """A statute app on each index backend (Milvus Lite when installed)."""
    if request.param == "milvus":
        pytest.importorskip("pymilvus")
        pytest.importorskip("milvus_lite")
    app = make_app(tmp_path, index_backend=request.param)
    yield app
    app.close()


def test_remember_and_recall_round_trip(app: Sleuth) -> None:
    memory = app.memory
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    stored = memory.remember(
        "alice",
        f"  {MURDER} ",
        _answer("Death or imprisonment for life [BNS_S103].", "BNS_S103", "BNS_S103"),
        RunStatus.COMPLETED,
        "t-murder",
        ["SUFFICIENT"],
        collection="test",
        created_at=when,
    )
    assert stored is not None and stored.citations == ["BNS_S103"]
    memory.remember("alice", THEFT, _answer("Theft is ... [BNS_S303].", "BNS_S303"),
                    "completed", "t-theft", collection="test")  # fmt: skip

    recalled = memory.recall_similar("alice", "punishment for murder", limit=1)
    assert len(recalled) == 1
    first = recalled[0]
    assert first.task_id == "t-murder"
    assert first.question == MURDER
    assert first.answer_text == "Death or imprisonment for life [BNS_S103]."
    assert first.citations == ["BNS_S103"]
    assert first.verdicts == ["SUFFICIENT"]
    assert first.status == "completed" and first.collection == "test"
    assert first.created_at == when and first.score > 0
    assert _ids(memory.recall_similar("alice", "dishonest theft of property", 1)) == ["t-theft"]
    assert set(_ids(memory.recall_similar("alice", "murder", 10))) == {"t-murder", "t-theft"}

    # the same task remembered again replaces its entry
    memory.remember("alice", MURDER, _answer("Death [BNS_S103]."), "completed", "t-murder")
    again = memory.recall_similar("alice", "murder", 10)
    assert sorted(_ids(again)) == ["t-murder", "t-theft"]
    assert next(m for m in again if m.task_id == "t-murder").answer_text == "Death [BNS_S103]."
    # scoping to a collection, empty query, limits
    assert _ids(memory.recall_similar("alice", "murder", 10, collection="other")) == []
    assert memory.recall_similar("alice", "   ") == []
    assert len(memory.recall_similar("alice", "murder", 0)) == 1  # clamped to 1..10


def test_recall_never_returns_another_users_memories(app: Sleuth) -> None:
    memory = app.memory
    users = ["alice", "bob", None, ANONYMOUS, ""]
    for n, user in enumerate(users):
        answer = _answer(f"Murder answer {n} [BNS_S103].", "BNS_S103")
        memory.remember(user, MURDER, answer, "completed", f"t{n}", collection="test")
    for n, user in enumerate(users):
        for query in (MURDER, "punishment", "murder answer 0 1 2 3 4"):
            assert _ids(memory.recall_similar(user, query, 10)) == [f"t{n}"], (user, query)
    assert _ids(memory.recall_similar("carol", MURDER, 10)) == []
    assert len({user_key(u) for u in users}) == len(users)
    assert user_key(None) == ANONYMOUS and user_key(ANONYMOUS) != ANONYMOUS

    assert memory.forget("bob") == 1
    assert memory.recall_similar("bob", MURDER) == []
    assert _ids(memory.recall_similar("alice", MURDER)) == ["t0"]


def test_service_remembers_per_user_and_recalls_before_the_run(app: Sleuth) -> None:
    agent = app.agent
    first = agent.execute_agentic_search(MURDER, "test", user_id="alice")
    assert first.status == RunStatus.COMPLETED
    assert first.trace["memory"] == {
        "enabled": True,
        "recalled": [],
        "stored": True,
        "error": None,
    }
    stored = app.catalog.get_run(first.task_id)
    assert stored is not None and stored["trace"]["memory"]["stored"] is True

    second = agent.execute_agentic_search("punishment for murder", "test", user_id="alice")
    assert second.trace["memory"]["recalled"] == [first.task_id]
    # bob and the anonymous user asked nothing yet: nothing of alice's is recalled for them
    bob = agent.execute_agentic_search(MURDER, "test", user_id="bob", mode="guided")
    assert bob.trace["memory"]["recalled"] == []
    anon = agent.execute_agentic_search(MURDER, "test")
    assert anon.trace["memory"]["recalled"] == []
    assert anon.trace["memory"]["stored"] is True

    recalled = app.memory.recall_similar("bob", MURDER, 10)
    assert _ids(recalled) == [bob.task_id]
    assert recalled[0].verdicts and recalled[0].verdicts[0] in {"SUFFICIENT", "PARTIAL"}
    assert _ids(app.memory.recall_similar(None, MURDER, 10)) == [anon.task_id]
    assert set(_ids(app.memory.recall_similar("alice", MURDER, 10))) == {
        first.task_id,
        second.task_id,
    }


def test_the_tool_shows_only_the_users_own_runs_of_this_collection(app: Sleuth) -> None:
    memory = app.memory
    memory.remember("alice", MURDER, _answer("A [BNS_S103].", "BNS_S103"), "completed", "a1",
                    collection="test")  # fmt: skip
    memory.remember("alice", MURDER, _answer("B [X_S1].", "X_S1"), "completed", "a2",
                    collection="other")  # fmt: skip
    memory.remember("bob", MURDER, _answer("C [BNS_S101].", "BNS_S101"), "completed", "b1",
                    collection="test")  # fmt: skip
    (tool,) = build_memory_tools(memory)
    assert tool.name == "recall_similar"
    assert "not evidence" in tool.description and "cite only" in tool.description

    ctx = RunContext(collection="test", user_id="alice")
    result = tool.invoke({"query": "murder", "limit": 5}, ctx)
    assert [m["task_id"] for m in result.payload["memories"]] == ["a1"]
    assert result.payload["memories"][0]["cited_sections"] == ["BNS_S103"]
    assert "not evidence" in result.payload["note"]
    assert "BNS_S103" in result.status
    assert result.chunks == [] and ctx.retrieved == {}  # nothing becomes citable

    bob = tool.invoke({"query": "murder"}, RunContext(collection="test", user_id="bob"))
    assert [m["task_id"] for m in bob.payload["memories"]] == ["b1"]
    anon = tool.invoke({"query": "murder"}, RunContext(collection="test"))
    assert anon.payload["memories"] == []
    for bad in ({"query": ""}, {"query": "x", "limit": 0}, {"query": "x", "limit": 11}):
        with pytest.raises(ToolError, match="invalid arguments for recall_similar"):
            tool.invoke(bad, ctx)


def test_a_recalled_citation_is_not_evidence(tmp_path) -> None:
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder", "top_k": 1}),
            tool_call("recall_similar", {"query": "theft"}),
            _final(
                "Murder is punished with death [BNS_S103]. Theft was answered before [BNS_S303].",
                ["BNS_S103", "BNS_S303"],
            ),
        ]
    )
    app = make_app(tmp_path, reasoner=LLMReasoner(model))
    app.memory.remember("alice", THEFT, _answer("Theft is taking [BNS_S303].", "BNS_S303"),
                        "completed", "old-theft", collection="test")  # fmt: skip
    response = app.agent.execute_agentic_search(MURDER, "test", user_id="alice")

    assert "recall_similar" in model.call_tool_names[0]
    observations = [m for m in model.calls[2] if isinstance(m, ToolMessage)]
    assert "old-theft" in observations[-1].content and "BNS_S303" in observations[-1].content
    assert response.tool_calls[1]["tool"] == "recall_similar" and response.tool_calls[1]["ok"]
    assert "BNS_S303" not in response.trace["retrieved_source_ids"]
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103"]
    removed = {r["source_id"]: r["reason"] for r in response.trace["citations_removed"]}
    assert removed["BNS_S303"] == "not retrieved in this run"
    app.close()


def test_opting_out_recalls_nothing_offers_no_tool_and_stores_nothing(tmp_path) -> None:
    model = ScriptedChatModel(
        [tool_call("rag_search", {"query": "murder"}), _final("Death [BNS_S103].", ["BNS_S103"])]
    )
    app = make_app(tmp_path, reasoner=LLMReasoner(model))
    app.memory.remember("alice", MURDER, _answer("Old [BNS_S103]."), "completed", "old")
    response = app.agent.execute_agentic_search(MURDER, "test", user_id="alice", use_memory=False)
    assert response.status == RunStatus.COMPLETED
    assert response.trace["memory"] == {
        "enabled": False,
        "recalled": [],
        "stored": False,
        "error": None,
    }
    assert all("recall_similar" not in names for names in model.call_tool_names)
    assert "recall_similar" not in app.agent.tool_registry()
    assert _ids(app.memory.recall_similar("alice", MURDER, 10)) == ["old"]
    app.close()


def test_the_memory_setting_turns_memory_off_globally(tmp_path) -> None:
    embedder = HashingEmbedder()
    on = make_app(tmp_path)
    on.close()
    settings = Settings(data_dir=tmp_path, embedding_model=embedder.name, memory=False)
    app = Sleuth(settings, embedder=embedder)
    response = app.agent.execute_agentic_search(MURDER, "test", user_id="alice")
    assert response.status == RunStatus.COMPLETED
    assert response.trace["memory"]["enabled"] is False
    assert app.memory.recall_similar("alice", MURDER) == []
    app.close()


def test_error_timeout_and_capped_runs_are_not_remembered(tmp_path) -> None:
    def explode(_messages):  # type: ignore[no-untyped-def]
        raise ConnectionError("model server unreachable")

    def slow(_messages):  # type: ignore[no-untyped-def]
        time.sleep(0.3)
        return tool_call("rag_search", {"query": f"murder {time.time()}"})

    for script, kwargs, status in [
        ([explode], {}, RunStatus.ERROR),
        ([slow], {"timeout_s": 0.5, "max_iterations": 50}, RunStatus.TIMEOUT),
    ]:
        model = ScriptedChatModel(script, repeat_last=True)  # type: ignore[arg-type]
        app = make_app(tmp_path / status.value, reasoner=LLMReasoner(model))
        response = app.agent.execute_agentic_search(MURDER, "test", user_id="alice", **kwargs)
        assert response.status == status
        assert response.trace["memory"]["enabled"] is True
        assert response.trace["memory"]["stored"] is False
        assert app.memory.recall_similar("alice", MURDER) == []
        app.close()

    app = make_app(tmp_path / "direct")
    for status in ("error", "timeout", "max_iterations", "repeated_action"):
        assert app.memory.remember("alice", MURDER, _answer("x"), status, status) is None
    assert app.memory.remember("alice", MURDER, _answer("No.", insufficient=True),
                               "insufficient_context", "ok") is not None  # fmt: skip
    assert _ids(app.memory.recall_similar("alice", MURDER, 10)) == ["ok"]
    app.close()


def test_a_failing_memory_never_fails_the_run(tmp_path) -> None:
    def broken(*_args):  # type: ignore[no-untyped-def]
        raise OSError("disk full")

    app = make_app(tmp_path)
    app.memory = AgentMemory(app.kb, index_opener=broken)  # before app.agent is built
    response = app.agent.execute_agentic_search(MURDER, "test", user_id="alice")
    assert response.status == RunStatus.COMPLETED
    assert [c.source_id for c in response.answer.citations][:1] == ["BNS_S103"]
    info = response.trace["memory"]
    assert info["enabled"] is True and info["stored"] is False and info["recalled"] == []
    assert "recall: OSError: disk full" in info["error"]
    assert "remember: OSError: disk full" in info["error"]
    stored = app.catalog.get_run(response.task_id)
    assert stored is not None and stored["trace"]["memory"]["error"] == info["error"]
    (tool,) = build_memory_tools(app.memory)
    with pytest.raises(ToolError, match="memory unavailable: OSError: disk full"):
        tool.invoke({"query": "murder"}, RunContext(collection="test", user_id="alice"))
    app.close()


def test_the_memory_index_is_not_a_collection(app: Sleuth) -> None:
    app.agent.execute_agentic_search(MURDER, "test", user_id="alice")
    name = memory_index_name(app.kb.embedder.name)
    assert name.startswith("_memory_")
    assert [c.name for c in app.catalog.list_collections()] == ["test"]
    with pytest.raises(UserError, match="invalid collection name"):
        app.kb.index(name)
    with pytest.raises(UserError, match="invalid collection name"):
        app.kb.search(name, "murder")
    with pytest.raises(ValueError, match="not an internal index name"):
        open_internal_index(app.settings, "test", 64)
    assert memory_doc_id("alice") != memory_doc_id(None)

    app.drop_collection("test")  # deleting the collection keeps the memories
    assert len(app.memory.recall_similar("alice", MURDER)) == 1
    if app.settings.index_backend == "local":
        assert (app.settings.data_dir / "indexes" / name).is_dir()
        assert not (app.settings.data_dir / "indexes" / "test").exists()


def test_cli_ask_no_memory(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import sleuth.cli as cli
    import sleuth.cli._common

    app = make_app(tmp_path)
    monkeypatch.setattr(sleuth.cli._common, "open_sleuth", lambda: app)
    runner = CliRunner()
    result = runner.invoke(cli.app, ["ask", MURDER, "-c", "test", "--quiet", "--no-memory"])
    assert result.exit_code == 0, result.output
    assert app.memory.recall_similar(None, MURDER) == []
    result = runner.invoke(cli.app, ["ask", MURDER, "-c", "test", "--quiet"])
    assert result.exit_code == 0, result.output
    assert len(app.memory.recall_similar(None, MURDER)) == 1
    app.close()
