"""The line of an answer being streamed while the REPL's prompt stays open.

Text can only be printed above an open prompt a whole line at a time (prompt_toolkit's
``patch_stdout`` redraws the prompt after each write, so half a line would be drawn over).
:class:`LiveLine` therefore hands out the streamed text in whole lines, exactly as the model
wrote them (so the terminal wraps and copies them as it would any text), and keeps the line
still being written for the REPL to show just above the prompt, wrapped to the terminal's
width, with its last :data:`SHOWN_ROWS` rows when it is longer.
"""

from __future__ import annotations

from prompt_toolkit.utils import get_cwidth

SHOWN_ROWS = 3
"""Rows of the line being written shown above the prompt (the start of a longer one is elided)."""


class LiveLine:
    """Streamed text, split into whole lines to print and the unfinished line to show."""

    def __init__(self) -> None:
        self.partial = ""
        """The line being written (no newline in it)."""
        self.started = False
        """Some text of this answer has come."""
        self._printed = False  # a line of this answer has been handed out

    def feed(self, text: str) -> str:
        """Add streamed ``text``; return the lines it completed (each ending in a newline,
        the first preceded by an empty line that sets the answer apart), or ``""``."""
        self.started = self.started or bool(text)
        self.partial += text
        if "\n" not in self.partial:
            return ""
        done, _, self.partial = self.partial.rpartition("\n")
        return self._lead() + done + "\n"

    def finish(self) -> str:
        """The answer ended: what is left to print (the unfinished line and an empty line
        after the answer), or ``""`` when nothing was streamed. Ready for the next answer."""
        if not self.started:
            return ""
        rest = self._lead() + self.partial + "\n\n"
        self.partial, self.started, self._printed = "", False, False
        return rest

    def _lead(self) -> str:
        lead = "" if self._printed else "\n"
        self._printed = True
        return lead

    def shown(self, width: int) -> str:
        """The unfinished line as rows of at most ``width`` cells (``""`` when there is none)."""
        if not self.partial:
            return ""
        width = max(width, 10)
        rows: list[str] = []
        row, used = "", 0
        for char in self.partial:
            cells = max(get_cwidth(char), 0)
            if used + cells > width - 1:  # the last column stays free: no wrap by the terminal
                rows.append(row)
                row, used = "", 0
            row += char
            used += cells
        rows.append(row)
        if len(rows) > SHOWN_ROWS:
            rows = rows[-SHOWN_ROWS:]
            rows[0] = "…" + rows[0][1:]
        return "\n".join(rows)
