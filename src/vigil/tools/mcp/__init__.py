"""MCP servers as tools: the agent calls the tools of the servers in ``mcp.servers`` (config.yaml).

* :mod:`.config` — the configured servers, ``${NAME}`` expansion, adding and removing them;
* :mod:`.naming` — ``mcp__<server>__<tool>`` within the providers' 64 characters;
* :mod:`.launch` — how a server is reached: a sandboxed command, or a URL with headers;
* :mod:`.client` — one live connection through the official ``mcp`` SDK (imported only here);
* :mod:`.pool` — the process's connections, started lazily and shared, in their own loop;
* :mod:`.pins` — the tools a session pins when it starts, replayed byte for byte;
* :mod:`.calls` — one call: who may make it, the approval, the error handling;
* :mod:`.results` — a tool result as the text the model reads;
* :mod:`.probe` — start, list, stop (``vigil mcp list/test``, ``vigil doctor``).
"""
