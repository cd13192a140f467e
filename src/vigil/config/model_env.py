"""The environment variables that supply model settings the config leaves empty.

Kept apart from :mod:`vigil.models` so that ``vigil config show`` can name them without
importing the model clients.
"""

from __future__ import annotations

KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
MODEL_ENV = "VIGIL_MODEL"
LOCAL_MODEL_ENV = "VIGIL_LOCAL_MODEL"
"""The GGUF file of ``model.provider: local`` when ``model.path`` is not set."""
