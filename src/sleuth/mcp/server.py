"""``sleuth mcp``: the knowledge base and the agent as MCP tools for other agents.

Four tools, over stdio or streamable HTTP (FastMCP from the official ``mcp`` SDK):

* ``rag_search(query, collection, top_k)`` — hybrid search, best sections first;
* ``read_section(source_id, collection)`` — a section's full text, neighbours, references;
* ``list_collections()`` — the collections with their counts and embedding model;
* ``ask(question, collection, mode, ...)`` — the agentic answer with checked citations.

Users and collections follow the rules of the CLI and the HTTP API. Without a user (no
``--user`` / ``SLEUTH_MCP_USER``) the server acts for the local installation, like the CLI:
every collection, runs and memory in the anonymous bucket. With a user (a name made by
``sleuth users create``) it acts for that user, like their API key: only the collections
they own (others are "unknown", whether they exist or not), runs stored and memory recalled
under their id; a revoked user's requests fail. A request without a collection uses
``--collection`` (default ``SLEUTH_DEFAULT_COLLECTION``). The
search and read tools are the agent's own (:mod:`sleuth.tools.rag`), so other agents see the
same payloads the ReAct agent sees. Blocking work runs in worker threads, so one slow
``ask`` does not stall other requests.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from sleuth.errors import ToolError, UserError, require
from sleuth.store.catalog import validate_collection_name
from sleuth.tools.base import RunContext
from sleuth.tools.rag import build_rag_tools

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

    from sleuth.app import Sleuth

SERVER_NAME = "sleuth"
DEFAULT_PORT = 8765
CITATION_TEXT_CHARS = 600
CollectionArg = Annotated[
    str | None, Field(description="Collection name (list_collections); default: the server's")
]
INSTRUCTIONS = (
    "sleuth answers questions from indexed document collections. Use `ask` for a complete "
    "answer with checked citations (it searches, reads and follows references itself), or "
    "`rag_search` then `read_section` to look at the sections yourself. `list_collections` "
    "names the collections. Cite sections by their source_id."
)


class SleuthTools:
    """The four tools as plain, blocking methods (the MCP server runs them in threads).

    Args:
        app: the sleuth installation.
        user: the name of the user every request runs as (``None``: the local installation).
        collection: the collection used when a request names none (default:
            ``SLEUTH_DEFAULT_COLLECTION``).

    Raises:
        UserError: no user named ``user``, or that user is revoked.
    """

    def __init__(self, app: Sleuth, user: str | None = None, collection: str | None = None):
        self.app = app
        self.user_name = user
        self.default_collection = collection or app.settings.default_collection
        self._tools = {t.name: t for t in build_rag_tools(app.kb)}
        self.user()  # an unknown or revoked user stops the server before it serves

    def user(self) -> str | None:
        """The id of the user the current request runs as (``None``: local installation).

        Raises:
            UserError: the user does not exist (any more) or has been revoked.
        """
        if self.user_name is None:
            return None
        info = self.app.catalog.get_user(self.user_name)
        if info is None:
            raise UserError(
                f"no user named '{self.user_name}' (--user / SLEUTH_MCP_USER; see: sleuth "
                "users list)"
            )
        if info.disabled:
            raise UserError(f"user '{self.user_name}' has been revoked")
        return info.id

    def collections(self, user_id: str | None) -> list[str]:
        """The collections ``user_id`` may use (all of them for the local installation)."""
        return [c.name for c in self.app.catalog.list_collections(owner=user_id)]

    def collection(self, name: str | None, user_id: str | None) -> str:
        """``name`` (or the default) if it is a valid name of a collection ``user_id`` may use.

        Raises:
            UserError: invalid name, or no such collection for this user.
        """
        chosen = validate_collection_name(name or self.default_collection)
        catalog = self.app.catalog
        exists = catalog.get_collection(chosen) is not None
        if not exists or (user_id is not None and catalog.collection_owner(chosen) != user_id):
            known = ", ".join(self.collections(user_id)) or "none"
            raise UserError(f"unknown collection '{chosen}' (collections: {known})")
        return chosen

    def _run_tool(
        self, tool: str, arguments: dict[str, Any], collection: str, user_id: str | None
    ) -> dict[str, Any]:
        ctx = RunContext(collection=collection, user_id=user_id)
        try:
            result = self._tools[tool].invoke(arguments, ctx)
        except ToolError as exc:
            raise UserError(str(exc)) from exc
        return result.payload

    def rag_search(self, query: str, collection: str | None = None, top_k: int = 5) -> dict:
        if not query.strip():
            raise UserError("query is empty")
        user_id = self.user()
        name = self.collection(collection, user_id)
        return self._run_tool("rag_search", {"query": query, "top_k": top_k}, name, user_id)

    def read_section(self, source_id: str, collection: str | None = None) -> dict:
        user_id = self.user()
        name = self.collection(collection, user_id)
        return self._run_tool("read_section", {"source_id": source_id}, name, user_id)

    def list_collections(self) -> dict:
        infos = self.app.catalog.list_collections(owner=self.user())
        return {
            "default": self.default_collection,
            "collections": [i.model_dump(mode="json") for i in infos],
        }

    def ask(
        self,
        question: str,
        collection: str | None = None,
        mode: str = "react",
        strict_grounding: bool | None = None,
        use_memory: bool = True,
    ) -> dict:
        user_id = self.user()
        name = self.collection(collection, user_id)
        response = self.app.agent.execute_agentic_search(
            question,
            name,
            user_id=user_id,
            mode=mode,  # type: ignore[arg-type]
            use_memory=use_memory,
            strict_grounding=strict_grounding,
        )
        answer = response.answer
        return {
            "answer": answer.answer_text,
            "status": response.status.value,
            "is_insufficient_context": answer.is_insufficient_context,
            "citations": [
                {
                    "source_id": c.source_id,
                    "number": c.number,
                    "title": c.title,
                    "text": c.text[:CITATION_TEXT_CHARS],
                    "support": c.support,
                }
                for c in answer.citations
            ],
            "key_points": answer.key_points,
            "ungrounded_sentences": answer.ungrounded_sentences,
            "collection": response.collection,
            "mode": response.mode,
            "task_id": response.task_id,
            "error": response.trace.get("error"),
        }


def _threaded(func: Callable[..., dict]) -> Callable[..., Any]:
    async def run(**kwargs: Any) -> dict:
        import anyio

        return await anyio.to_thread.run_sync(lambda: func(**kwargs))

    return run


def build_server(tools: SleuthTools, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> FastMCP:
    """The FastMCP server of ``tools`` (``host``/``port`` are used by streamable HTTP).

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
    """
    require("mcp", "mcp", "sleuth mcp")
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    root = logging.getLogger()
    before = list(root.handlers)
    server = FastMCP(
        SERVER_NAME, instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING"
    )
    for handler in root.handlers:  # FastMCP installs a root handler: keep it to warnings
        if handler not in before:  # (libraries such as bm25s log DEBUG on their own loggers)
            handler.setLevel(logging.WARNING)
    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

    async def rag_search(
        query: Annotated[str, Field(description="What to look for: key words or a question")],
        collection: CollectionArg = None,
        top_k: Annotated[int, Field(ge=1, le=20, description="How many sections")] = 5,
    ) -> dict[str, Any]:
        """Hybrid (BM25 + dense) search of a collection: the best sections, each with its
        source_id, title, score, a snippet and the source_ids it references."""
        return await _threaded(tools.rag_search)(query=query, collection=collection, top_k=top_k)

    async def read_section(
        source_id: Annotated[str, Field(description="A source_id returned by rag_search")],
        collection: CollectionArg = None,
    ) -> dict[str, Any]:
        """The full text of a section (all its parts), its previous and next sections and
        the sections it references."""
        return await _threaded(tools.read_section)(source_id=source_id, collection=collection)

    async def list_collections() -> dict[str, Any]:
        """The collections: name, documents, chunks, embedding model, index backend."""
        return await _threaded(tools.list_collections)()

    async def ask(
        question: Annotated[str, Field(min_length=1, description="The question to answer")],
        collection: CollectionArg = None,
        mode: Annotated[
            Literal["react", "guided"],
            Field(description="'react': the autonomous agent loop; 'guided': planned steps"),
        ] = "react",
        strict_grounding: Annotated[
            bool | None,
            Field(description="Drop sentences no cited section supports (default: server's)"),
        ] = None,
        use_memory: Annotated[
            bool, Field(description="Recall and remember the user's runs")
        ] = True,
    ) -> dict[str, Any]:
        """Answer a question from a collection with sleuth's agent: it searches, reads and
        follows references, then answers with citations checked against the sections it
        retrieved (or says the context is insufficient). Takes seconds."""
        return await _threaded(tools.ask)(
            question=question,
            collection=collection,
            mode=mode,
            strict_grounding=strict_grounding,
            use_memory=use_memory,
        )

    for func in (rag_search, read_section, list_collections):
        server.add_tool(func, annotations=read_only)
    server.add_tool(ask, annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=False))
    return server


class _ProtocolStdout(io.TextIOBase):
    """``sys.stdout`` while serving over stdio: ``buffer`` is the protocol channel (the MCP
    SDK writes there), text printed by anything else goes to stderr."""

    def __init__(self, buffer: io.BufferedWriter, text: io.TextIOBase) -> None:
        self.buffer = buffer
        self._text = text

    def write(self, s: str) -> int:
        return self._text.write(s)

    def flush(self) -> None:
        self._text.flush()

    def fileno(self) -> int:
        return self._text.fileno()


def _guard_stdout() -> None:
    """Keep stdout for the protocol alone: file descriptor 1 (native libraries) and
    ``print`` go to stderr; the SDK gets the original stdout as ``sys.stdout.buffer``."""
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = _ProtocolStdout(protocol, sys.stderr)  # type: ignore[assignment]


def _check_port(host: str, port: int) -> None:
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port"
        ) from exc


def serve(
    app: Sleuth,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    user: str | None = None,
    collection: str | None = None,
) -> None:
    """Serve the tools until the client disconnects (stdio) or the process is stopped.

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
        UserError: the HTTP port cannot be bound.
    """
    server = build_server(SleuthTools(app, user, collection), host, port)
    who = f"user '{user}'" if user else "anonymous user"
    if transport == "stdio":
        print(f"sleuth mcp: serving over stdio as {who}", file=sys.stderr, flush=True)
        _guard_stdout()
        server.run("stdio")
        return
    _check_port(host, port)
    print(
        f"sleuth mcp: streamable HTTP on http://{host}:{port}/mcp as {who}",
        file=sys.stderr,
        flush=True,
    )
    server.run("streamable-http")
