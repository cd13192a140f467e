"""The messaging platforms enabled in config.yaml: their secrets are in the environment (only
the variables' names are ever shown) and their SDK imports."""

from __future__ import annotations

import importlib
from typing import Mapping

from vigil.doctor.result import NEEDS_CONFIG, CheckResult, Subject, ok, problem, skipped

AREA = "platforms"
SDKS = {
    "slack": ("slack_sdk", "pip install 'vigil[slack]'"),
    "telegram": ("telegram", "pip install 'vigil[telegram]'"),
}


def check_platforms(subject: Subject) -> list[CheckResult]:
    settings = subject.settings
    if settings is None:
        return [skipped(AREA, "platforms", NEEDS_CONFIG)]
    enabled = [name for name in SDKS if getattr(settings, name).enabled]
    if not enabled:
        return [ok(AREA, "platforms", "none enabled (slack.enabled and telegram.enabled are false)")]
    results: list[CheckResult] = []
    for name in enabled:
        results.append(_secrets(name, needed(name, settings), subject.env))
        results.append(_sdk(name))
    if "telegram" in enabled and settings.telegram.mode == "webhook" and not settings.telegram.webhook_url:
        results.append(
            problem(
                AREA,
                "telegram webhook",
                "telegram.mode is webhook but telegram.webhook_url is not set",
                "vigil config set telegram.webhook_url https://HOST/telegram/webhook",
            )
        )
    return results


def needed(platform: str, settings: object) -> list[str]:
    """The environment variables an enabled ``platform`` reads its secrets from."""
    section = getattr(settings, platform)
    if platform == "slack":
        return [
            section.bot_token_env,
            section.app_token_env if section.socket_mode else section.signing_secret_env,
        ]
    return [section.token_env] + ([section.webhook_secret_env] if section.mode == "webhook" else [])


def _secrets(platform: str, names: list[str], env: Mapping[str, str]) -> CheckResult:
    missing = [name for name in names if not env.get(name, "").strip()]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        return problem(
            AREA,
            f"{platform} secrets",
            f"{platform} is enabled but {', '.join(missing)} {verb} not set in the environment",
            "; ".join(f"export {name}=..." for name in missing)
            + " (in the gateway's environment too: `vigil gateway install` writes it into the service)",
        )
    return ok(AREA, f"{platform} secrets", f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} set")


def _sdk(platform: str) -> CheckResult:
    module, install = SDKS[platform]
    try:
        importlib.import_module(module)
    except Exception as exc:  # an ImportError, or a broken install failing while it loads
        return problem(
            AREA, f"{platform} SDK", f"{module} cannot be imported ({type(exc).__name__}: {exc})", install
        )
    return ok(AREA, f"{platform} SDK", f"{module} imports")
