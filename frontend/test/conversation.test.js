import { beforeEach, describe, expect, it, vi } from "vitest";
import { ConversationView } from "../src/conversation.js";
import { SID, frame, newView } from "./view.js";

function rows(box) {
  return [...box.children].filter((r) => r.classList.contains("message")).map((r) => {
    const kind = r.classList.contains("user") ? "user" : r.classList.contains("assistant") ? "assistant" : "notice";
    return [kind, (r.querySelector(".bubble") || r).textContent.trim()];
  });
}

describe("ConversationView", () => {
  let box;
  let view;
  let event;
  let statuses;

  beforeEach(() => {
    statuses = [];
    ({ box, view, event } = newView({ onStatus: (busy, queued) => statuses.push([busy, queued]) }));
  });

  it("streams an answer token by token and ends it rendered, with a copy button", async () => {
    view.addPending("hi", "c1");
    event("message_accepted", { client_id: "c1", inbox_id: 1, text: "hi" });
    event("turn_began", { kind: "user", text: "hi" });
    event("delta", { text: "Hello **wor" });
    await frame();
    const streaming = box.querySelector(".message.assistant.streaming");
    expect(streaming.textContent).toContain("Hello");
    event("delta", { text: "ld**" });
    event("turn_ended", { kind: "user", content: "Hello **world**" });
    expect(box.querySelector(".message.assistant.streaming")).toBeNull();
    expect(box.querySelector(".message.assistant strong").textContent).toBe("world");
    expect(box.querySelector(".message.assistant button.copy").getAttribute("aria-label")).toBe("Copy answer");
    expect(rows(box)).toEqual([["user", "hi"], ["assistant", "Hello world"]]);
    expect(statuses.at(-1)).toEqual([false, 0]);
  });

  it("keeps messages sent during a turn below it, each next to its answer", () => {
    view.addPending("slow one", "c1");
    event("message_accepted", { client_id: "c1", inbox_id: 1, text: "slow one" });
    event("turn_began", { kind: "user", text: "slow one" });
    event("delta", { text: "slow " });
    view.addPending("queued one", "c2");
    view.addPending("queued two", "c3");
    event("message_accepted", { client_id: "c2", inbox_id: 2, text: "queued one" });
    event("message_accepted", { client_id: "c3", inbox_id: 3, text: "queued two" });
    event("delta", { text: "answer" });
    expect(rows(box).map(([kind, text]) => (kind === "user" ? text : kind))).toEqual(
      ["slow one", "assistant", "queued one", "queued two"]);
    event("turn_ended", { kind: "user", content: "slow answer" });
    event("turn_began", { kind: "user", text: "queued one" });
    event("delta", { text: "answer one" });
    event("turn_ended", { kind: "user", content: "answer one" });
    event("turn_began", { kind: "user", text: "queued two" });
    event("delta", { text: "answer two" });
    event("turn_ended", { kind: "user", content: "answer two" });
    expect(rows(box)).toEqual([
      ["user", "slow one"], ["assistant", "slow answer"],
      ["user", "queued one"], ["assistant", "answer one"],
      ["user", "queued two"], ["assistant", "answer two"],
    ]);
    expect(box.querySelectorAll(".pending").length).toBe(0);
  });

  it("does not draw a message twice when the history already has it (a reload mid-turn)", () => {
    view.addPending("hello", "c1");
    view.renderHistory({ messages: [{ role: "user", content: "hello", inbox_id: 7 }], busy: true, queued: 0 });
    event("message_accepted", { client_id: "c1", inbox_id: 7, text: "hello" });
    event("turn_began", { kind: "user", text: "hello" });
    event("delta", { text: "hi" });
    event("turn_ended", { kind: "user", content: "hi" });
    expect(rows(box)).toEqual([["user", "hello"], ["assistant", "hi"]]);
  });

  it("redraws from the history after a reconnect and keeps bubbles not yet accepted", () => {
    view.addPending("sent while offline", "c9");
    view.renderHistory({
      messages: [
        { role: "user", content: "before", inbox_id: 1 },
        { role: "assistant", content: "answer before", tool_calls: [] },
      ],
      busy: false, queued: 0,
    });
    expect(rows(box)).toEqual([["user", "before"], ["assistant", "answer before"], ["user", "sent while offline"]]);
    expect(box.querySelector(".message.user.pending").textContent).toBe("sent while offline");
  });

  it("asks for the history when the outbox has an answer the stream missed", () => {
    const reload = vi.fn();
    view = new ConversationView(box, { reload });
    view.handle({ type: "reply", session_id: SID, kind: "reply", text: "an answer I never saw" });
    expect(reload).toHaveBeenCalledTimes(1);
  });

  it("marks a failed send", () => {
    view.addPending("lost", "c1");
    view.failPending("c1", "the gateway cannot be reached");
    expect(box.querySelector(".message.user.failed .failed-note").textContent).toBe("not sent: the gateway cannot be reached");
  });

  it("shows a tool as waiting for approval (not running) until it is answered", () => {
    event("turn_began", { kind: "user", text: "clean up" });
    event("tool_started", { name: "terminal", arguments: JSON.stringify({ command: "rm -rf /tmp/x" }) });
    const card = box.querySelector("details.tool");
    expect(card.querySelector("summary code").textContent).toBe("$ rm -rf /tmp/x");
    expect(card.querySelector(".tool-state").textContent).toBe("running…");
    event("approval_request", { id: "a1", tool: "terminal", description: "run rm -rf /tmp/x", expires_at: Date.now() / 1000 + 300 });
    expect(card.querySelector(".tool-state").textContent).toBe("waiting for approval");
    const approval = box.querySelector(".approval");
    expect(approval.querySelector(".approval-title").textContent).toBe("Waiting for your approval to run terminal");
    expect(approval.querySelector(".approval-countdown").textContent).toMatch(/^denied automatically in (4m 5\ds|5m 00s)$/);
    event("approval_resolved", { id: "a1", approved: false });
    expect(card.querySelector(".tool-state").textContent).toBe("refused");
    event("tool_finished", { name: "terminal", content: "the user declined: run rm -rf /tmp/x; nothing was done", is_error: true });
    expect(card.querySelector(".tool-state").textContent).toBe("refused");
    expect(approval.querySelectorAll("button:disabled").length).toBe(2);
  });

  it("shows a stopped turn as stopped", () => {
    event("turn_began", { kind: "user", text: "go" });
    event("delta", { text: "partial" });
    event("turn_ended", { kind: "user", cancelled: true });
    expect(box.querySelector(".turn-cancelled").textContent).toBe("Stopped.");
  });

  it("draws /help as a list without /quit", () => {
    view.addPending("/help", "c1");
    event("message_accepted", { client_id: "c1", inbox_id: 1, text: "/help" });
    event("command_reply", {
      text: "Commands:\n  /help                        list the commands (alias /?)\n  /stop                        suspend this conversation\n  /quit                        leave (the conversation is kept) (alias /exit, /q)\n  /heartbeat [...]             recurring instruction: every 15m PROMPT | status",
      is_error: false,
    });
    const terms = [...box.querySelectorAll(".help-list dt")].map((dt) => dt.textContent);
    expect(terms).toEqual(["/help", "/stop", "/heartbeat [...]"]);
    expect(box.querySelector(".help-list dd").textContent).toBe("list the commands");
  });

  it("says why a message waits, counting down, and clears it when the model answers", () => {
    vi.useFakeTimers();
    try {
      event("turn_began", { kind: "user", text: "hello" });
      event("waiting", { inbox_id: 4, reason: "transient", text: "waiting for the model (retrying, next try in 40 s)",
        retry_in: 40, retry_at: Date.now() / 1000 + 40 });
      const line = () => box.querySelector(".turn-waiting")?.textContent;
      expect(line()).toBe("Waiting for the model (retrying, next try in 40 s)");
      vi.advanceTimersByTime(10_000);
      expect(line()).toBe("Waiting for the model (retrying, next try in 30 s)");
      event("waiting", { inbox_id: 4, reason: null, text: null });
      expect(line()).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it("shows the gateway's notice instead of an answer, with Retry when it names /retry", () => {
    const send = vi.fn();
    view = new ConversationView(box, { send });
    view.handle({ type: "reply", session_id: SID, kind: "notice",
      text: "⚠ vigil cannot answer yet. No model is configured: no API key or endpoint was found." });
    view.handle({ type: "reply", session_id: SID, kind: "notice",
      text: "⚠ vigil set this message aside without answering it. Send /retry 12 to try it again." });
    const notices = [...box.querySelectorAll(".reply-notice")];
    expect(notices[0].textContent).toContain("No model is configured");
    expect(notices[0].querySelector("button")).toBeNull();
    notices[1].querySelector("button").click();
    expect(send).toHaveBeenCalledWith("/retry 12");
  });

  it("does not repeat a turn's error as a notice", () => {
    event("turn_began", { kind: "user", text: "x" });
    event("turn_ended", { kind: "user", error: "boom" });
    event("reply", { kind: "notice", text: "⚠ boom" });
    expect(box.querySelectorAll(".reply-notice").length).toBe(0);
    expect(box.querySelector(".turn-error").textContent).toBe("Error: boom");
  });

  it("opens a long conversation at its end and draws older messages on demand, in order", () => {
    const messages = [];
    for (let n = 0; n < 1000; n++) {
      messages.push({ role: "user", content: `question ${n}` }, { role: "assistant", content: `answer ${n}`, tool_calls: [] });
    }
    view.renderHistory({ messages, busy: false, queued: 0 });
    const drawn = () => rows(box);
    expect(drawn().length).toBe(150);
    expect(drawn()[0]).toEqual(["user", "question 925"]);
    expect(drawn().at(-1)).toEqual(["assistant", "answer 999"]);
    const earlier = box.querySelector("button.earlier");
    expect(earlier.textContent).toBe("Show earlier messages (1850)");
    earlier.click();
    expect(drawn().length).toBe(300);
    expect(drawn()[0]).toEqual(["user", "question 850"]);
    expect(drawn().slice(148, 152).map(([, text]) => text)).toEqual(["question 924", "answer 924", "question 925", "answer 925"]);
    while (box.querySelector("button.earlier")) box.querySelector("button.earlier").click();
    expect(drawn().length).toBe(2000);
    expect(drawn()[0]).toEqual(["user", "question 0"]);
  }, 30_000);  // 2,000 answers through markdown-it in jsdom: seconds on a loaded machine
});
