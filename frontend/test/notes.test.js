import { beforeEach, describe, expect, it } from "vitest";
import { newView } from "./view.js";

const PERU = "↳ background: “what is the capital of Peru?”\n\nLima, on the **Pacific** coast.";
const FAILED = "↳ background: “summarize the logs” failed (session 0a1b2c3d): the model refused it";
const ENDED = "♥ Heartbeat ended (every 15m, fired 3 times): it was set to run until then, so it is cleared. Prompt: check CI";

// (kind, what it says) of each row, as the page shows them.
function rows(box) {
  return [...box.children].filter((r) => r.classList.contains("message")).map((r) => {
    if (r.classList.contains("background-note")) {
      return ["background", r.querySelector(".note-status").textContent, r.querySelector(".note-prompt")?.textContent,
        r.querySelector(".bubble").textContent];
    }
    if (r.classList.contains("heartbeat-note")) return ["heartbeat-note", r.textContent];
    const kind = r.classList.contains("user") ? "user" : r.classList.contains("assistant") ? "assistant" : "notice";
    return [kind, (r.querySelector(".bubble") || r).textContent.trim()];
  });
}

describe("notes in a conversation", () => {
  let box;
  let view;
  let event;

  beforeEach(() => {
    ({ box, view, event } = newView());
  });

  it("show a background task's answer live as a marked note, once, with its own Copy", () => {
    event("note", { text: PERU, reason: "background", status: "answered", child_id: "c1", prompt: "what is the capital of Peru?" });
    event("reply", { kind: "notice", text: PERU });  // its copy for the chat
    event("note", { text: ENDED, reason: "ended" });
    event("reply", { kind: "notice", text: ENDED });
    expect(rows(box)).toEqual([
      ["background", "answered", "“what is the capital of Peru?”", "Lima, on the Pacific coast."],
      ["heartbeat-note", ENDED],
    ]);
    const note = box.querySelector(".background-note");
    expect(note.getAttribute("aria-label")).toBe("Background task");
    expect(note.querySelector(".markdown strong").textContent).toBe("Pacific");
    expect(note.vigilTurn.allText).toBe("Lima, on the **Pacific** coast.");
    expect(note.querySelector("button.copy").getAttribute("aria-label")).toBe("Copy the background answer");
    expect(box.querySelectorAll(".reply-notice").length).toBe(0);
  });

  it("show the same notes from the history, a failed task as failed", () => {
    view.renderHistory({
      messages: [
        { role: "user", content: "hello", inbox_id: 1 },
        { role: "assistant", content: "Hi.", tool_calls: [] },
        { role: "note", content: PERU, background: { session: "c1", status: "answered" } },
        { role: "note", content: FAILED, background: { session: "c2", status: "failed" } },
        { role: "note", content: ENDED, background: null },
      ],
      busy: false, queued: 0,
    });
    expect(rows(box)).toEqual([
      ["user", "hello"], ["assistant", "Hi."],
      ["background", "answered", "“what is the capital of Peru?”", "Lima, on the Pacific coast."],
      ["background", "failed", "“summarize the logs”", "Failed (session 0a1b2c3d): the model refused it"],
      ["heartbeat-note", ENDED],
    ]);
  });

  it("show a note whose live event this page missed when its copy comes", () => {
    event("reply", { kind: "notice", text: PERU });
    expect(rows(box).map(([kind]) => kind)).toEqual(["background"]);
  });
});
