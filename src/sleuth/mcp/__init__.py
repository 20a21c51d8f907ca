"""MCP in both directions.

* :mod:`sleuth.mcp.client` — the agent calls tools of the MCP servers listed in
  ``SLEUTH_MCP_SERVERS`` (stdio or streamable HTTP), namespaced ``<server>__<tool>``.
* :mod:`sleuth.mcp.server` — ``sleuth mcp`` exposes ``rag_search``, ``read_section``,
  ``list_collections`` and ``ask`` to other agents.

:mod:`sleuth.mcp.config` and :mod:`sleuth.mcp.schema` need only pydantic; the client and the
server need the ``mcp`` extra (``pip install "sleuth[mcp]"``), imported on first use.
"""
