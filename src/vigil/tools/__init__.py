"""The agent's built-in tools: each a small module, run through ``vigil.tools.registry``."""
