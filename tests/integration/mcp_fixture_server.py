"""A FastMCP server for the MCP client tests, in one of three roles.

    python mcp_fixture_server.py ROLE [--http PORT]

* ``healthy``: ``add(a, b)``, ``lookup(key, options)`` (a pydantic model argument, so its
  schema has ``$defs``/``$ref`` and a nullable ``anyOf``), ``secret()`` (kept out by
  allow-lists in the tests);
* ``hang``: ``wait(seconds)`` never returns;
* ``die``: ``crash(message)`` ends the server process in the middle of the call.

Without ``--http`` it serves over stdio, else streamable HTTP on 127.0.0.1:PORT/mcp.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel, Field

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi"}


class LookupOptions(BaseModel):
    uppercase: bool = Field(default=False, description="Return the value in upper case")
    prefix: str | None = Field(default=None, description="Text put before the value")


def build(role: str, port: int) -> FastMCP:
    server = FastMCP(f"fixture-{role}", host="127.0.0.1", port=port, log_level="WARNING")
    if role == "healthy":

        @server.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @server.tool()
        def lookup(key: str, options: LookupOptions | None) -> str:
            """The capital city of a country."""
            value = CAPITALS.get(key.lower(), "unknown")
            if options is not None:
                value = value.upper() if options.uppercase else value
                value = f"{options.prefix or ''}{value}"
            return value

        @server.tool()
        def secret() -> str:
            """Not for the agent."""
            return "s3cret"

    elif role == "hang":

        @server.tool()
        async def wait(seconds: float = 1.0) -> str:
            """Wait, then say done (it never does)."""
            await asyncio.sleep(3600)
            return "done"

    elif role == "die":

        @server.tool()
        def crash(message: str = "bye") -> str:
            """Echo a message (the server exits instead)."""
            sys.stderr.write(f"crashing on purpose: {message}\n")
            sys.stderr.flush()
            os._exit(3)

    else:
        raise SystemExit(f"unknown role {role!r}")
    return server


def main() -> None:
    role = sys.argv[1]
    port = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--http" else 0
    server = build(role, port)
    server.run("streamable-http" if port else "stdio")


if __name__ == "__main__":
    main()
