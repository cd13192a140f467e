"""llama.cpp inside the vigil process (``model.provider: local``), through ``xllamacpp``.

xllamacpp runs llama.cpp's own HTTP server on a thread of this process, bound to 127.0.0.1 on a
port the OS picks. vigil talks to it with the ordinary OpenAI-compatible client, so requests,
streaming and the prompt cache (``usage.prompt_tokens_details.cached_tokens``) work exactly as
with any other endpoint. Everything that can go wrong before the first request (no xllamacpp,
no file, not a GGUF, too big for the memory) becomes a ``LocalModelError`` with one clear line.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from vigil.config.settings import ModelSettings
from vigil.config.model_env import LOCAL_MODEL_ENV
from vigil.models.base import ModelError

GGUF_MAGIC = b"GGUF"
INSTALL_HINT = "pip install 'vigil[local]'"
# KV cache, compute buffers and the runtime on top of the weights, as a share of the file.
_MEMORY_OVERHEAD = 1.2


class LocalModelError(ModelError):
    """The local engine cannot run the configured model; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What the engine is started with."""

    path: Path
    threads: int
    context: int
    """Tokens of context per slot."""
    slots: int

    @classmethod
    def from_settings(cls, settings: ModelSettings, env: Mapping[str, str] = os.environ) -> "EngineOptions":
        """Options for ``settings``; raises ``LocalModelError`` when no model file is named."""
        raw = settings.path or env.get(LOCAL_MODEL_ENV) or ""
        if not raw:
            raise LocalModelError(
                "model.provider is local but no model file is named: "
                f"`vigil config set model.path /path/to/model.gguf` or export {LOCAL_MODEL_ENV}=/path/to/model.gguf "
                "(`vigil models list` shows the GGUF files vigil knows)."
            )
        local = settings.local
        return cls(
            path=Path(os.path.expanduser(raw)),
            threads=local.threads or (os.cpu_count() or 1),
            context=local.context,
            slots=local.slots,
        )


def check_model_file(path: Path) -> int:
    """The size of ``path`` in bytes, after checking it is a GGUF file that fits in memory."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
            size = os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        raise LocalModelError(f"the model file {path} does not exist (model.path / {LOCAL_MODEL_ENV}).") from None
    except IsADirectoryError:
        raise LocalModelError(f"the model path {path} is a directory, not a .gguf file.") from None
    except OSError as exc:
        raise LocalModelError(f"cannot read the model file {path}: {exc.strerror or exc}.") from None
    if magic != GGUF_MAGIC:
        raise LocalModelError(
            f"{path} is not a GGUF model file (it does not start with 'GGUF'); "
            "download a .gguf build of the model, e.g. from Hugging Face."
        )
    available = available_memory()
    if available is not None and size * _MEMORY_OVERHEAD > available:
        raise LocalModelError(
            f"the model {path.name} ({size / 2**30:.1f} GiB) does not fit in the "
            f"{available / 2**30:.1f} GiB of memory available; choose a smaller or more quantised GGUF."
        )
    return size


def available_memory() -> int | None:
    """Bytes of memory available for new allocations (``None`` where the OS does not say)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class LocalEngine:
    """One running llama.cpp server inside this process. Start with :func:`start_engine`."""

    def __init__(self, server: Any, options: EngineOptions, api_key: str, base_url: str | None = None) -> None:
        """``server`` is ``None`` for an engine another process runs at ``base_url`` (shared)."""
        self._server = server
        self._lock = threading.Lock()
        self.options = options
        self.api_key = api_key
        """Required by the engine: other users of the machine can reach 127.0.0.1 too."""
        self.base_url = base_url or str(server.listening_address).rstrip("/") + "/v1"
        props = get_json(self.base_url.removesuffix("/v1") + "/props", api_key)
        self.props: dict[str, Any] = props if isinstance(props, dict) else {}

    @property
    def native_tool_calls(self) -> bool:
        """Whether the model's chat template renders tools and tool calls itself."""
        caps = self.props.get("chat_template_caps") or {}
        return bool(caps.get("supports_tool_calls"))

    @property
    def context(self) -> int:
        """Tokens of context the engine holds (all slots together)."""
        settings = self.props.get("default_generation_settings") or {}
        return int(settings.get("n_ctx") or self.options.context)

    def close(self) -> None:
        """Stop the server and free the model (idempotent)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            del server


def start_engine(options: EngineOptions, api_key: str | None = None) -> LocalEngine:
    """Load the model and start serving it; blocking (seconds for a large model). Requests
    must carry ``api_key`` (a fresh random one when not given).

    Raises ``LocalModelError`` for every failure a user can fix.
    """
    api_key = api_key or secrets.token_urlsafe(24)
    check_model_file(options.path)
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelError(
            f"model.provider is local but the llama.cpp engine is not installed: {INSTALL_HINT}"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(options.path)
    params.n_parallel = options.slots
    params.n_ctx = options.context * options.slots
    params.cpuparams.n_threads = options.threads
    params.cpuparams_batch.n_threads = options.threads
    # Sleep instead of spinning between work items: on a laptop shared with other programs
    # spinning threads steal the cores the other threads of the same batch wait for.
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    params.port = 0  # the OS picks a free one; the server stays on 127.0.0.1
    params.use_jinja = True
    params.cache_prompt = True
    params.warmup = False
    params.verbosity = -1
    params.endpoint_props = True
    params.api_keys = [api_key]
    try:
        server = xllamacpp.Server(params)
    except Exception as exc:  # xllamacpp raises plain ValueError/RuntimeError for a bad model
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise LocalModelError(
            f"llama.cpp could not load {options.path}: the file is damaged or truncated, or its model "
            f"architecture is unknown to this llama.cpp ({reason})."
        ) from None
    return LocalEngine(server, options, api_key)


def get_json(url: str, api_key: str) -> Any:
    """GET ``url`` of a local engine; ``{}`` when it does not answer with JSON."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (our own 127.0.0.1 server)
            data = json.loads(response.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, (dict, list)) else {}
