"""``sleuth mcp``: the knowledge base and the agent as MCP tools for other agents.

Four tools, over stdio or streamable HTTP (FastMCP from the official ``mcp`` SDK):

* ``rag_search(query, collection, top_k)`` — hybrid search, best sections first;
* ``read_section(source_id, collection)`` — a section's full text, neighbours, references;
* ``list_collections()`` — the collections with their counts and embedding model;
* ``ask(question, collection, mode, ...)`` — the agentic answer with checked citations.

Users and collections follow the rules of the CLI and the HTTP API. Over streamable HTTP
every request carries an API key (``Authorization: Bearer <key>``, made by ``sleuth users
create``), checked by the SDK's bearer middleware with :class:`ApiKeyVerifier`: no key, an
unknown key or a revoked user's key is refused with 401 before any tool runs, so one process
serves many users. The key's user is the caller: only the collections they own (others are
"unknown", whether they exist or not), runs stored and memory recalled under their id. Over
stdio, and over HTTP with ``--no-auth`` (explicit, for local single-user use), there is no key:
without a user (no ``--user`` / ``SLEUTH_MCP_USER``) the server acts for the local
installation, like the CLI (every collection, runs and memory in the anonymous bucket); with a
user it acts for that user, like their key (a revoked user's requests fail). A request
without a collection uses ``--collection`` (default ``SLEUTH_DEFAULT_COLLECTION``). The search
and read tools are the agent's own (:mod:`sleuth.tools.rag`), so other agents see the
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

from sleuth.api.keys import authenticate
from sleuth.errors import ToolError, UserError, require
from sleuth.store.catalog import Catalog, validate_collection_name
from sleuth.tools.base import RunContext
from sleuth.tools.rag import build_rag_tools

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.fastmcp import FastMCP

    from sleuth.app import Sleuth

log = logging.getLogger(__name__)

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


class ApiKeyVerifier:
    """The SDK's ``TokenVerifier`` for sleuth API keys: the bearer token is a key made by
    ``sleuth users create``; its user's id becomes the access token's ``client_id``.

    Checked on every HTTP request, so a key revoked while its session is open is refused from
    the next request on.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def check(self, token: str) -> AccessToken | None:
        """The access token of an active user's key; ``None`` for a malformed, unknown or
        revoked key (the SDK answers 401 ``invalid_token``)."""
        from mcp.server.auth.provider import AccessToken

        user = authenticate(self.catalog, token)
        if user is None:
            return None
        if user.disabled:
            log.warning("sleuth mcp: refused the revoked API key of user '%s'", user.name)
            return None
        return AccessToken(token=token, client_id=user.id, scopes=[])

    async def verify_token(self, token: str) -> AccessToken | None:
        import anyio

        return await anyio.to_thread.run_sync(self.check, token)


def _request_token() -> AccessToken | None:
    """The access token the SDK's auth middleware verified for this request (HTTP with keys)."""
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:  # no mcp extra: no authenticated requests either
        return None
    return get_access_token()


class SleuthTools:
    """The four tools as plain, blocking methods (the MCP server runs them in threads).

    Args:
        app: the sleuth installation.
        user: the name of the user every request runs as (``None``: the local installation);
            only without ``require_key``.
        collection: the collection used when a request names none (default:
            ``SLEUTH_DEFAULT_COLLECTION``).
        require_key: every request must carry an API key (HTTP with auth): its user is the
            caller; a request without one is refused, never served as the local installation.

    Raises:
        UserError: no user named ``user``, that user is revoked, or ``user`` with
            ``require_key``.
    """

    def __init__(
        self,
        app: Sleuth,
        user: str | None = None,
        collection: str | None = None,
        *,
        require_key: bool = False,
    ):
        if require_key and user is not None:
            raise UserError(
                "--user / SLEUTH_MCP_USER cannot be combined with API keys: over HTTP each "
                "request's key names its user (use --no-auth for a single local user)"
            )
        self.app = app
        self.user_name = user
        self.require_key = require_key
        self.default_collection = collection or app.settings.default_collection
        self._tools = {t.name: t for t in build_rag_tools(app.kb)}
        if not require_key:
            self.user()  # an unknown or revoked user stops the server before it serves

    def user(self) -> str | None:
        """The id of the user the current request runs as (``None``: local installation):
        the API key's user when the request was authenticated, else ``--user``.

        Raises:
            UserError: no key though one is required; the user does not exist (any more) or
                has been revoked.
        """
        token = _request_token()
        if token is not None:
            return token.client_id
        if self.require_key:
            raise UserError("authentication required: send 'Authorization: Bearer <API key>'")
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
        thread_id: str | None = None,
        new_thread: bool = False,
    ) -> dict:
        user_id = self.user()
        if thread_id is not None and new_thread:
            raise UserError("thread_id and new_thread exclude each other")
        if thread_id is not None and collection is None:
            name = self.app.agent.thread(thread_id, user_id).collection
        else:
            name = self.collection(collection, user_id)
        if new_thread and thread_id is None:
            thread_id = self.app.catalog.create_thread(name, user_id).thread_id
        response = self.app.agent.execute_agentic_search(
            question,
            name,
            user_id=user_id,
            mode=mode,  # type: ignore[arg-type]
            use_memory=use_memory,
            strict_grounding=strict_grounding,
            thread_id=thread_id,
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
            "thread_id": thread_id,
            "rewritten_question": (response.trace.get("conversation") or {}).get(
                "rewritten_question"
            ),
            "error": response.trace.get("error"),
        }


def _threaded(func: Callable[..., dict]) -> Callable[..., Any]:
    async def run(**kwargs: Any) -> dict:
        import anyio

        return await anyio.to_thread.run_sync(lambda: func(**kwargs))

    return run


def build_server(tools: SleuthTools, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> FastMCP:
    """The FastMCP server of ``tools`` (``host``/``port`` are used by streamable HTTP; with
    ``tools.require_key`` its HTTP endpoint takes API keys as bearer tokens).

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
    """
    require("mcp", "mcp", "sleuth mcp")
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    auth: dict[str, Any] = {}
    if tools.require_key:  # the SDK's bearer middleware: 401 before any tool runs
        where = f"[{host}]" if ":" in host else host
        auth = {
            "token_verifier": ApiKeyVerifier(tools.app.catalog),
            # sleuth is its own issuer (keys from `sleuth users create`), no OAuth server
            "auth": AuthSettings(issuer_url=f"http://{where}:{port}", resource_server_url=None),
        }
    root = logging.getLogger()
    before = list(root.handlers)
    server = FastMCP(
        SERVER_NAME, instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING", **auth
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
        thread_id: Annotated[
            str | None,
            Field(
                description="Ask in this conversation thread (a thread_id an earlier ask "
                "returned): a follow-up ('and for an attempt?') is read in the thread's context"
            ),
        ] = None,
        new_thread: Annotated[
            bool,
            Field(
                description="Start a conversation thread with this question (its thread_id "
                "is returned: pass it with the follow-ups)"
            ),
        ] = False,
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
            thread_id=thread_id,
            new_thread=new_thread,
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
    auth: bool = True,
) -> None:
    """Serve the tools until the client disconnects (stdio) or the process is stopped.

    Over HTTP with ``auth`` every request needs an API key and runs as its user (``user``
    must be ``None``); without ``auth``, and over stdio, every request runs as ``user``.

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
        UserError: the HTTP port cannot be bound; ``user`` with HTTP auth.
    """
    require_key = transport == "http" and auth
    server = build_server(SleuthTools(app, user, collection, require_key=require_key), host, port)
    who = f"user '{user}'" if user else "anonymous user"
    if transport == "stdio":
        print(f"sleuth mcp: serving over stdio as {who}", file=sys.stderr, flush=True)
        _guard_stdout()
        server.run("stdio")
        return
    _check_port(host, port)
    if require_key:
        who = "the user of each request's API key (Authorization: Bearer)"
    else:
        who += ", without authentication (--no-auth)"
    print(
        f"sleuth mcp: streamable HTTP on http://{host}:{port}/mcp as {who}",
        file=sys.stderr,
        flush=True,
    )
    server.run("streamable-http")
