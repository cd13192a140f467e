"""First render of a long conversation in the web chat: how long Chromium takes from opening the
page to showing the conversation's last answer, for conversations of 100 and 2,000 messages.

Each conversation (user/assistant pairs whose answers hold Markdown, a link and a highlighted
code block) is written into a fresh profile's SQLite store, ``vigil gateway run`` serves it
(a child process; the model is the fake, never called), and Debian's Chromium (Playwright,
headless, also a child process) opens ``/#ID`` ``--runs`` times. Reported per size: the median
time to the last answer drawn (from navigationStart, the browser's clock), how many message rows
were drawn at first (the page opens at the end and draws older messages on scroll), and the
ratio of the 2,000-message time to the 100-message one.

    .venv/bin/python bench/web_first_render.py [--sizes 100,2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_load_parts.process import Gateway, free_port  # noqa: E402

from vigil.store import NewMessage, open_store  # noqa: E402
from vigil.testing.fake_model import FakeModelServer  # noqa: E402

ANSWER = """Here is **answer {n}**, with a link to https://example.com/docs/{n} and some code:

```python
def step_{n}(items):
    # keep the even ones
    return [item * 2 for item in items if item % 2 == 0]
```

- first point
- second point with `inline code`"""


def make_conversation(home: Path, messages: int) -> str:
    store = open_store(home / "state.db")
    try:
        session = store.create_session(source="web", title=f"{messages} messages")
        for n in range(messages // 2):
            store.append_message(session.id, NewMessage("user", f"Question {n}: what about step {n}?"))
            store.append_message(session.id, NewMessage("assistant", ANSWER.format(n=n)))
        return session.id
    finally:
        store.close()


def measure(url: str, token: str, conversation: str, last: str, runs: int) -> tuple[list[float], int]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    times: list[float] = []
    drawn = 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(f"{url}/login?token={token}")
        page.wait_for_url(f"{url}/")
        for _ in range(runs + 1):  # the first run warms the caches and is not counted
            page.goto(f"{url}/#{conversation}")
            page.wait_for_function("""(last) => [...document.querySelectorAll('.message.assistant .markdown')]
                .some(m => m.textContent.includes(last))""", arg=last, timeout=120_000)
            elapsed = page.evaluate("() => performance.now()")
            drawn = page.evaluate("() => document.querySelectorAll('#messages > .message').length")
            times.append(elapsed)
        browser.close()
    return times[1:], drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,2000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    fake = FakeModelServer()
    fake.start()
    results: dict[int, tuple[float, int]] = {}
    try:
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix="vigil-render-") as folder:
                home = Path(folder)
                conversation = make_conversation(home, size)
                gateway = Gateway(home, free_port(), fake, None, [])
                gateway.start()
                try:
                    times, drawn = measure(gateway.url, gateway.token, conversation, f"answer {size // 2 - 1}", args.runs)
                finally:
                    gateway.stop()
                results[size] = (statistics.median(times), drawn)
                print(f"{size:>6} messages: first render {statistics.median(times):7.0f} ms median of {len(times)} "
                      f"(min {min(times):.0f}, max {max(times):.0f}); {drawn} rows drawn at first")
    finally:
        fake.stop()
    if len(sizes) >= 2:
        low, high = results[sizes[0]][0], results[sizes[-1]][0]
        print(f"ratio {sizes[-1]} / {sizes[0]} messages: {high / low:.2f}")


if __name__ == "__main__":
    main()
