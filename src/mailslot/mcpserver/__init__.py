"""mailslot's MCP server: every channel as tools an agent's host already speaks.

* ``config``  -- ``ServerConfig``/``load_config``: who the agent is and what is served, fixed at
  start from the command line and environment (identity from the transport, never an argument).
* ``spec``    -- ``ToolSpec``, ``Call``, ``Reply``; ``schema`` checks arguments against a schema.
* ``exchange_tools``, ``chat_tools``, ``other_tools`` -- the tools; each calls the channel
  function the CLI calls and renders short text.
* ``fence``   -- message bodies as fenced untrusted data, sender said by transport.
* ``server``  -- ``dispatch`` (per call, no SDK) and ``serve`` (the SDK over stdio).
* ``onboard`` -- registration commands and instruction text per host.

The package is not named ``mcp`` so that it can never shadow the SDK's top-level ``mcp``.
"""

from __future__ import annotations

from mailslot.mcpserver.config import ServerConfig, load_config

__all__ = ["ServerConfig", "load_config"]
