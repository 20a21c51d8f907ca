"""Tools of external MCP servers, offered to the agent next to the knowledge-base tools.

:class:`MCPToolbox` connects to the servers of ``SLEUTH_MCP_SERVERS`` (stdio subprocesses
or streamable HTTP endpoints — a gateway such as IBM's MCP Context Forge is one HTTP
endpoint), lists their tools, keeps those the allow-list lets through, and wraps each in an
:class:`MCPTool` named ``<server>__<tool>`` whose parameters are the adapted schema
(:mod:`sleuth.mcp.schema`).

The agent is synchronous, the MCP SDK is asyncio/anyio: one event loop runs in a daemon
thread and every request is submitted to it with a deadline. Each server keeps one session
open, owned by a task that enters and leaves its transport and session contexts. Failures
never raise into the agent:

* a server that cannot be reached at discovery is left out (its tools are not offered) and
  reported in :meth:`MCPToolbox.status`, hence in the run's ``trace["mcp"]``;
* a call that outlives the server's ``timeout_s``, or whose connection is lost (the server
  exited, the HTTP endpoint went away), returns
  ``ToolResult(ok=False, status="Error: tool unavailable: <server>/<tool> ...")`` — an
  observation the agent can act on;
* a call made inside a run gets no more than the run's time left (``SLEUTH_RUN_TIMEOUT_S``
  / ``timeout_s``); one stopped there returns the same kind of result, and its server is
  not marked down;
* after such a failure the server counts as down for ``retry_after_s`` (its calls fail at
  once), then its session is reopened on the next call or run.

MCP results are observations for the agent, not citable evidence: citations still name
sections of the knowledge base.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import TimeoutError as FutureTimeoutError
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from sleuth.errors import SleuthError, ToolError, require
from sleuth.llm import calls
from sleuth.mcp.config import MCPServerSpec, load_mcp_servers
from sleuth.mcp.schema import AdaptedSchema, adapt_schema, tool_name
from sleuth.tools.base import RunContext, Tool, ToolResult

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

    from sleuth.config import Settings

log = logging.getLogger(__name__)

PURPOSE = "Calling tools of MCP servers (SLEUTH_MCP_SERVERS)"
DESCRIPTION_CHARS = 1024
STATUS_CHARS = 200
CLOSE_TIMEOUT_S = 8.0
"""A stdio server gets 2 s to exit after its stdin closes, then 2 s after SIGTERM."""


class _Arguments(BaseModel):
    """Placeholder argument model: MCP tools validate against their own JSON Schema."""

    model_config = ConfigDict(extra="allow")


def _reason(exc: BaseException) -> str:
    """A one-line reason for a failure, with exception groups unwrapped to their first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _seconds(value: float) -> str:
    return f"{value:g} s"


class _Unavailable(Exception):
    """The server cannot serve the request: the message says why, as a verb phrase
    ("timed out after 2 s"); ``already_down`` when it was known to be down before."""

    def __init__(self, reason: str, already_down: bool = False) -> None:
        super().__init__(reason)
        self.already_down = already_down


RUN_DEADLINE = "was stopped at the run's deadline (SLEUTH_RUN_TIMEOUT_S / timeout_s)"
"""Why a call that ran out of the run's time has no result (the server is not marked
down: it was the run's time, not the server's ``timeout_s``, that ran out)."""


class _Failed(Exception):
    """The server answered, with an error of the tool or of the request."""


@dataclass
class MCPTool(Tool):
    """A tool of an MCP server: raw JSON Schema parameters, calls go through the toolbox."""

    server: str = ""
    remote_name: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    adapted: AdaptedSchema = field(default_factory=lambda: AdaptedSchema({"type": "object"}))
    toolbox: MCPToolbox | None = None
    _validator: Any = field(default=None, repr=False)

    @property
    def external(self) -> bool:
        return True

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.adapted.parameters,
            },
        }

    def problems(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` against the server's schema, or ``None``."""
        from jsonschema import Draft202012Validator, SchemaError, validators

        if self._validator is None:
            cls = validators.validator_for(self.input_schema, default=Draft202012Validator)
            try:
                cls.check_schema(self.input_schema)
                self._validator = cls(self.input_schema)
            except SchemaError:  # the server will judge its own arguments
                self._validator = False
        if not self._validator:
            return None
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        return (
            "; ".join(
                f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}"
                for e in errors[:5]
            )
            or None
        )

    def invoke(self, arguments: dict[str, Any], ctx: RunContext) -> ToolResult:
        """Validate ``arguments`` against the server's schema and call the tool.

        Raises:
            ToolError: invalid arguments. An unavailable server is a result, not an error.
        """
        args = dict(arguments or {})
        for name in self.adapted.null_defaults:
            args.setdefault(name, None)
        problems = self.problems(args)
        if problems:
            raise ToolError(f"invalid arguments for {self.name}: {problems}")
        if self.toolbox is None:
            raise ToolError(f"{self.name} is not connected to its MCP server")
        ctx.external_tools.add(self.name)
        return self.toolbox.call(self.server, self.remote_name, args)


def _not_called_directly(_args: BaseModel, _ctx: RunContext) -> ToolResult:
    raise ToolError("MCP tools are called through MCPTool.invoke")


def _text_of(result: CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)  # type: ignore[union-attr]
        elif kind == "resource":
            resource = block.resource  # type: ignore[union-attr]
            parts.append(getattr(resource, "text", None) or f"<resource {resource.uri}>")
        elif kind == "resource_link":
            parts.append(f"<resource {block.uri}>")  # type: ignore[union-attr]
        else:
            parts.append(f"<{kind} {getattr(block, 'mimeType', '')}: not shown>".strip())
    return "\n".join(parts).strip()


def _one_line(text: str, limit: int = STATUS_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def to_tool_result(name: str, server: str, tool: str, result: CallToolResult) -> ToolResult:
    """An MCP ``CallToolResult`` as the agent's :class:`ToolResult` (structured content
    when the tool gives it, else the text of its content blocks)."""
    text = _text_of(result)
    payload: dict[str, Any] = {"server": server, "tool": tool}
    if result.structuredContent is not None:
        payload["result"] = result.structuredContent
        summary = text or json.dumps(result.structuredContent, ensure_ascii=False)
    else:
        payload["content"] = text
        summary = text
    if result.isError:
        return ToolResult(
            ok=False,
            status=f"Error: {server}/{tool} failed: {_one_line(summary) or 'no message'}",
            payload=payload,
        )
    return ToolResult(status=f"{name}: {_one_line(summary) or '(empty result)'}", payload=payload)


def _watched_transport(on_broken: Callable[[BaseException], None]) -> Any:
    """An httpx transport that reports a broken connection (refused, reset, a response
    stream cut short) to ``on_broken``: the SDK's streamable HTTP client only logs a POST
    stream that ends without its response, which would leave the call waiting until its
    timeout. Timeouts are not reported (an idle event stream may time out harmlessly)."""
    import httpx

    broken = (httpx.NetworkError, httpx.RemoteProtocolError)

    class WatchedStream(httpx.AsyncByteStream):
        def __init__(self, inner: httpx.AsyncByteStream) -> None:
            self._inner = inner

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            try:
                async for chunk in self._inner:
                    yield chunk
            except broken as exc:
                on_broken(exc)
                raise

        async def aclose(self) -> None:
            await self._inner.aclose()

    class WatchedTransport(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                response = await self._inner.handle_async_request(request)
            except broken as exc:
                on_broken(exc)
                raise
            assert isinstance(response.stream, httpx.AsyncByteStream)
            response.stream = WatchedStream(response.stream)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return WatchedTransport()


class _Connection:
    """One session with a server, owned by a task (anyio wants the transport and session
    contexts entered and left by the same task). ``task`` ends when the connection does."""

    def __init__(self, spec: MCPServerSpec, log_path: Path | None) -> None:
        self.spec = spec
        self.log_path = log_path
        self.session: ClientSession | None = None
        self.error: BaseException | None = None
        self.ready = asyncio.Event()
        self.closing = asyncio.Event()
        self.broken: BaseException | None = None
        self.broken_event = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{spec.name}")

    @property
    def alive(self) -> bool:
        return self.session is not None and not self.task.done() and self.broken is None

    def _on_broken(self, exc: BaseException) -> None:
        if self.broken is None:
            self.broken = exc
            self.broken_event.set()

    async def _transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        spec = self.spec
        if spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            errlog: IO[str]
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                errlog = stack.enter_context(self.log_path.open("a", encoding="utf-8"))
            else:
                import os

                errlog = stack.enter_context(open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
            params = StdioServerParameters(
                command=spec.command or "", args=spec.args, env=spec.env or None, cwd=spec.cwd
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            return read, write
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        client = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=spec.headers,
                timeout=httpx.Timeout(spec.connect_timeout_s, read=300.0),
                follow_redirects=True,
                transport=_watched_transport(self._on_broken),
            )
        )
        read, write, _session_id = await stack.enter_async_context(
            streamable_http_client(spec.url or "", http_client=client)
        )
        return read, write

    async def _run(self) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                # the handshake races close(): leaving the contexts normally (not by
                # cancelling this task) lets the transport stop a stdio server cleanly
                handshake = asyncio.ensure_future(session.initialize())
                closing = asyncio.ensure_future(self.closing.wait())
                await asyncio.wait({handshake, closing}, return_when=asyncio.FIRST_COMPLETED)
                closing.cancel()
                if not handshake.done():
                    handshake.cancel()
                    return
                handshake.result()
                self.session = session
                self.ready.set()
                await self.closing.wait()
        except BaseException as exc:  # the owner reads .error; nothing escapes the task
            self.error = exc
        finally:
            self.session = None
            self.ready.set()

    async def close(self) -> None:
        """Leave the session (a stdio server is stopped)."""
        self.closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), CLOSE_TIMEOUT_S)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()


class _Server:
    """The state of one configured server (touched only on the toolbox's loop)."""

    def __init__(self, spec: MCPServerSpec, log_path: Path | None) -> None:
        self.spec = spec
        self.log_path = log_path
        self.conn: _Connection | None = None
        self.lock: asyncio.Lock | None = None
        self.tools: list[MCPTool] | None = None
        self.down_until = 0.0
        self.error: str | None = None
        self.discovery_error: str | None = None
        self.closing: set[asyncio.Task[None]] = set()

    def drop(self, conn: _Connection) -> None:
        """Close ``conn`` in the background (awaited by :meth:`close_all`)."""
        task = asyncio.get_running_loop().create_task(conn.close())
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    async def close_all(self) -> None:
        """Close the connection and wait for those still closing."""
        conn, self.conn = self.conn, None
        if conn is not None:
            self.drop(conn)
        await asyncio.gather(*list(self.closing), return_exceptions=True)

    def down(self, reason: str) -> None:
        """Count the server as down for ``retry_after_s``; its connection is dropped."""
        self.error = reason
        self.down_until = time.monotonic() + self.spec.retry_after_s
        conn, self.conn = self.conn, None
        if conn is not None:
            self.drop(conn)

    async def connected(self) -> _Connection:
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            if self.conn is not None and self.conn.alive:
                return self.conn
            wait = self.down_until - time.monotonic()
            if wait > 0:
                raise _Unavailable(
                    f"is down ({self.error}); it is retried in {wait:.0f} s", already_down=True
                )
            if self.conn is not None:  # broken since its last use
                self.drop(self.conn)
                self.conn = None
            try:
                spec = self.spec.expanded()
            except SleuthError as exc:
                raise _Unavailable(f"cannot start: {exc}") from exc
            conn = _Connection(spec, self.log_path)
            try:
                await asyncio.wait_for(conn.ready.wait(), spec.connect_timeout_s)
            except TimeoutError:
                self.drop(conn)
                raise _Unavailable(
                    f"could not connect: no answer within {_seconds(spec.connect_timeout_s)}"
                ) from None
            if not conn.alive:
                await conn.close()
                detail = _reason(conn.error) if conn.error else "connection closed"
                if self.log_path is not None and self.spec.transport == "stdio":
                    detail += f" (server log: {self.log_path})"
                raise _Unavailable(f"could not connect: {detail}")
            self.conn = conn
            return conn


class MCPToolbox:
    """The tools of the configured MCP servers, with a synchronous, thread-safe API.

    Args:
        specs: the servers (see :mod:`sleuth.mcp.config`).
        log_dir: where the stderr of stdio servers goes (``mcp-<name>.log``); default:
            discarded.

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
    """

    def __init__(self, specs: Sequence[MCPServerSpec], log_dir: Path | None = None) -> None:
        require("mcp", "mcp", PURPOSE)
        sdk_log = logging.getLogger("mcp.client")
        if sdk_log.level == logging.NOTSET:  # its transport errors reach the run as results
            sdk_log.setLevel(logging.CRITICAL)
        self.specs = list(specs)
        self._servers = {
            s.name: _Server(s, log_dir / f"mcp-{s.name}.log" if log_dir else None)
            for s in self.specs
        }
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._finalizer = weakref.finalize(self, MCPToolbox._shutdown, self._servers, [])

    @classmethod
    def from_settings(cls, settings: Settings) -> MCPToolbox | None:
        """The toolbox of ``settings.mcp_servers`` (``None`` when no server is configured);
        stdio servers log to ``<data_dir>/logs``."""
        specs = load_mcp_servers(settings.mcp_servers)
        return cls(specs, settings.data_dir / "logs") if specs else None

    # -- the loop thread -------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise ToolError("the MCP toolbox is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="sleuth-mcp-client", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                self._finalizer.detach()
                # runs on close(), or at interpreter exit (stdio servers are stopped)
                self._finalizer = weakref.finalize(
                    self, MCPToolbox._shutdown, self._servers, [loop, thread]
                )
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Run ``coro`` on the loop; ``TimeoutError`` (and the coroutine cancelled) past
        ``timeout`` seconds."""
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except FutureTimeoutError:
            future.cancel()
            raise TimeoutError from None

    @staticmethod
    def _shutdown(servers: dict[str, _Server], held: list[Any]) -> None:
        if not held:
            return
        loop, thread = held

        async def close_all() -> None:
            await asyncio.gather(*(s.close_all() for s in servers.values()))

        if loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(close_all(), loop).result(CLOSE_TIMEOUT_S + 2)
            except Exception:  # closing is best effort: the process may be exiting
                log.debug("closing MCP sessions failed", exc_info=True)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CLOSE_TIMEOUT_S)
        if not loop.is_running():
            loop.close()

    def close(self) -> None:
        """Close every session (stdio servers are stopped) and the loop thread."""
        with self._lock:
            self._closed = True
        self._finalizer()

    # -- discovery ------------------------------------------------------------------------

    async def _discover(self, server: _Server) -> None:
        from mcp import types

        try:
            conn = await server.connected()
            assert conn.session is not None
            listed: list[types.Tool] = []
            cursor: str | None = None
            while True:
                if cursor is None:
                    page = await conn.session.list_tools()
                else:
                    page = await conn.session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor)
                    )
                listed.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    break
        except Exception as exc:
            reason = str(exc) if isinstance(exc, _Unavailable) else _reason(exc)
            server.discovery_error = reason
            if not (isinstance(exc, _Unavailable) and exc.already_down):
                server.down(reason)
            return
        taken: set[str] = set()
        tools: list[MCPTool] = []
        for remote in listed:
            if not server.spec.allows(remote.name):
                continue
            name = tool_name(server.spec.name, remote.name, taken)
            taken.add(name)
            about = " ".join((remote.description or "").split()) or f"The '{remote.name}' tool."
            tools.append(
                MCPTool(
                    name=name,
                    description=(
                        f"{about[:DESCRIPTION_CHARS]} (tool '{remote.name}' of the MCP server "
                        f"'{server.spec.name}')"
                    ),
                    args_schema=_Arguments,
                    func=_not_called_directly,
                    server=server.spec.name,
                    remote_name=remote.name,
                    input_schema=dict(remote.inputSchema or {}),
                    adapted=adapt_schema(remote.inputSchema),
                    toolbox=self,
                )
            )
        server.tools = tools
        server.discovery_error = None
        server.error = None

    async def _discover_all(self, servers: list[_Server]) -> None:
        await asyncio.gather(*(self._discover(s) for s in servers))

    def tools(self) -> list[MCPTool]:
        """The tools to offer a run: those of the servers discovered and not down.

        Servers not discovered yet (never, or down at their last attempt and past
        ``retry_after_s`` since) are tried now, concurrently, each within its
        ``connect_timeout_s``. A server that failed less than ``retry_after_s`` ago is left
        out until then. Never raises for an unreachable server.
        """
        now = time.monotonic()
        pending = [s for s in self._servers.values() if s.tools is None and now >= s.down_until]
        if pending:
            limit = max(s.spec.connect_timeout_s for s in pending) * 2 + 5
            try:
                self._submit(self._discover_all(pending), limit)
            except TimeoutError:
                for s in pending:
                    if s.tools is None and s.down_until <= now:
                        s.discovery_error = s.error = f"discovery timed out after {limit:g} s"
                        s.down_until = time.monotonic() + s.spec.retry_after_s
        now = time.monotonic()
        return [t for s in self._servers.values() if now >= s.down_until for t in (s.tools or [])]

    def status(self) -> dict[str, Any]:
        """Per server: transport, ``status`` (``ok``, ``down`` or ``unavailable`` — never
        reached), its offered tools and last error; ``warnings``: one line per server whose
        tools are not offered."""
        servers: dict[str, Any] = {}
        warnings: list[str] = []
        now = time.monotonic()
        for name, s in self._servers.items():
            if s.tools is None:
                state = "unavailable"
                reason = s.discovery_error or s.error or "not reached"
                warnings.append(
                    f"MCP server '{name}' unavailable at discovery: {reason}; its tools are "
                    "not offered"
                )
            else:
                state = "down" if now < s.down_until else "ok"
            servers[name] = {
                "transport": s.spec.transport,
                "status": state,
                "tools": [t.name for t in s.tools or []],
                "error": s.error if s.tools is not None else (s.discovery_error or s.error),
            }
        return {"servers": servers, "warnings": warnings}

    # -- calls ----------------------------------------------------------------------------

    async def _call(
        self, server: _Server, tool: str, args: dict[str, Any], timeout: float
    ) -> CallToolResult:
        """The tool's result within ``timeout`` seconds.

        Raises:
            _Unavailable: down, unreachable, past ``timeout``, or the connection was lost.
            _Failed: the server answered with an error.
        """
        from mcp.shared.exceptions import McpError
        from mcp.types import CONNECTION_CLOSED

        conn = await server.connected()
        assert conn.session is not None
        call = asyncio.ensure_future(
            conn.session.call_tool(tool, args, read_timeout_seconds=timedelta(seconds=timeout))
        )
        broken = asyncio.ensure_future(conn.broken_event.wait())
        try:
            done, _ = await asyncio.wait(
                {call, conn.task, broken},
                timeout=timeout + 1.0,
                return_when=asyncio.FIRST_COMPLETED,
            )
        except asyncio.CancelledError:  # the caller gave up: the request goes with it
            call.cancel()
            raise
        finally:
            broken.cancel()
        if call not in done:
            call.cancel()
            if conn.broken is not None or conn.task.done():
                cause = conn.broken or conn.error
                reason = _reason(cause) if cause else "the server closed it"
                raise _Unavailable(f"lost its connection during the call: {reason}")
            raise _Unavailable(f"timed out after {_seconds(timeout)}")
        try:
            return call.result()
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                raise _Unavailable(
                    "lost its connection during the call: the server closed it"
                ) from exc
            if "Timed out while waiting" in exc.error.message:
                raise _Unavailable(f"timed out after {_seconds(timeout)}") from exc
            raise _Failed(exc.error.message) from exc
        except (RuntimeError, ValueError) as exc:  # e.g. a result that breaks its schema
            raise _Failed(_reason(exc)) from exc
        except Exception as exc:  # closed streams, HTTP errors: the connection is gone
            raise _Unavailable(f"lost its connection during the call: {_reason(exc)}") from exc

    async def _guarded_call(
        self, server: _Server, tool: str, args: dict[str, Any], timeout: float, run_cut: bool
    ) -> CallToolResult | _Unavailable | _Failed:
        """The result, or why there is none (an unavailable server is then marked down,
        unless the call only ran out of the run's time: ``run_cut``)."""
        try:
            return await self._call(server, tool, args, timeout)
        except _Unavailable as exc:
            if run_cut and str(exc).startswith("timed out"):
                return _Unavailable(RUN_DEADLINE, already_down=True)
            if not exc.already_down:
                server.down(str(exc))
            return exc
        except _Failed as exc:
            return exc
        except Exception as exc:
            reason = _Unavailable(f"could not be called ({_reason(exc)})")
            server.down(str(reason))
            return reason

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call ``tool`` of ``server``; never raises for an unavailable server.

        Returns:
            The tool's result; ``ok=False`` with status ``Error: tool unavailable:
            <server>/<tool> <reason>`` when the server is down, unreachable, past its
            ``timeout_s`` or lost mid-call; ``ok=False`` with ``Error: <server>/<tool>
            failed: ...`` when the tool itself reports an error.
        """
        state = self._servers.get(server)
        if state is None:
            raise ToolError(f"no MCP server '{server}'")
        name = tool_name(server, tool)
        for t in state.tools or []:
            if t.remote_name == tool:
                name = t.name
        timeout = state.spec.timeout_s
        limit = state.spec.connect_timeout_s + timeout + 5
        run = calls.current()
        left = run.remaining() if run is not None else None
        # the run's deadline may come first: the call then gets only the time left, and a
        # wait it ends says so (the server is not marked down for the run's time)
        waits_on_run = left is not None and left < timeout
        ends_on_run = left is not None and max(left, 0.0) + 0.25 < limit
        if left is not None:
            timeout, limit = min(timeout, max(left, 0.0)), min(limit, max(left, 0.0) + 0.25)
        try:
            if waits_on_run and timeout <= 0:
                raise TimeoutError
            outcome = self._submit(
                self._guarded_call(state, tool, arguments, timeout, waits_on_run), limit
            )
        except TimeoutError:
            outcome = (
                _Unavailable(RUN_DEADLINE, already_down=True)
                if ends_on_run
                else _Unavailable(f"timed out after {_seconds(state.spec.timeout_s)}")
            )
        if isinstance(outcome, _Failed):
            return ToolResult(
                ok=False,
                status=f"Error: {server}/{tool} failed: {_one_line(str(outcome))}",
                payload={"server": server, "tool": tool, "error": str(outcome)},
            )
        if isinstance(outcome, _Unavailable):
            return ToolResult(
                ok=False,
                status=f"Error: tool unavailable: {server}/{tool} {outcome}. Do not call it "
                "again in this run; use the other tools or answer without it",
                payload={"server": server, "tool": tool, "unavailable": str(outcome)},
            )
        return to_tool_result(name, server, tool, outcome)
