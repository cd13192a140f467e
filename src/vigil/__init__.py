"""vigil — a persistent personal AI agent runtime."""

__version__ = "0.1.0"
