"""What the browser tests read off the web chat page (Playwright pages)."""

from __future__ import annotations

from typing import Any


def record_streaming(page: Any) -> None:
    """Keep every text the streaming answer bubble shows in ``window.__seen`` (to see it grow
    token by token)."""
    page.evaluate("""() => {
        window.__seen = [];
        new MutationObserver(() => {
            const bubble = document.querySelector('.message.assistant.streaming .bubble');
            if (bubble) window.__seen.push(bubble.textContent);
        }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
    }""")
