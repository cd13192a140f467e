import { beforeEach, describe, expect, it, vi } from "vitest";
import { frame, newView } from "./view.js";

// (kind, text, waiting label) of each top-level row, as the page shows them.
function rows(box) {
  return [...box.children].filter((r) => r.classList.contains("message")).map((r) => {
    const kind = r.classList.contains("user") ? "user" : r.classList.contains("assistant") ? "assistant"
      : r.classList.contains("heartbeat-fold") ? "fold" : r.classList.contains("heartbeat-turn") ? "heartbeat" : "notice";
    const text = kind === "fold" ? r.querySelector("summary").textContent : (r.querySelector(".bubble") || r).textContent.trim();
    const label = r.querySelector(".queue-label")?.textContent;
    return label ? [kind, text, label] : [kind, text];
  });
}

describe("the messages waiting behind the running turn", () => {
  let box;
  let view;
  let event;
  let withdraw;
  let statuses;

  beforeEach(() => {
    withdraw = vi.fn(async () => true);
    statuses = [];
    ({ box, view, event } = newView({ withdraw, onStatus: (busy, queued) => statuses.push([busy, queued]) }));
  });
  const sent = (text, clientId, inbox) => {
    view.addPending(text, clientId);
    event("message_accepted", { client_id: clientId, inbox_id: inbox, text });
  };
  const queue = (...items) => event("queue", {
    waiting: items.map(([inbox, text], n) => ({ position: n + 1, inbox_id: inbox, text })),
  });

  it("are numbered below the turn, renumbered as they go, and ordinary messages once answered", async () => {
    sent("build it", "c1", 1);
    event("turn_began", { kind: "user", text: "build it" });
    event("delta", { text: "building" });
    sent("run the tests", "c2", 2);
    sent("deploy", "c3", 3);
    queue([2, "run the tests"], [3, "deploy"]);
    await frame();
    expect(rows(box)).toEqual([
      ["user", "build it"], ["assistant", "building"],
      ["user", "run the tests", "Queued #1"], ["user", "deploy", "Queued #2"],
    ]);
    expect(statuses.at(-1)).toEqual([true, 2]);  // the header says "2 queued"
    const remove = box.querySelectorAll(".queue-remove");
    expect([...remove].map((b) => b.getAttribute("aria-label"))).toEqual([
      "Remove waiting message 1: run the tests", "Remove waiting message 2: deploy"]);
    event("turn_ended", { kind: "user", content: "built" });
    queue([3, "deploy"]);  // "run the tests" left the queue: its turn begins
    event("turn_began", { kind: "user", text: "run the tests" });
    expect(rows(box)).toEqual([
      ["user", "build it"], ["assistant", "building"], ["user", "run the tests"], ["assistant", ""],
      ["user", "deploy", "Queued #1"],
    ]);
    expect(box.querySelectorAll(".queued").length).toBe(1);
  });

  it("withdraws one with its Remove button, and drops one withdrawn elsewhere", async () => {
    sent("build it", "c1", 1);
    event("turn_began", { kind: "user", text: "build it" });
    sent("run the tests", "c2", 2);
    sent("deploy", "c3", 3);
    sent("tidy up", "c4", 4);
    queue([2, "run the tests"], [3, "deploy"], [4, "tidy up"]);
    box.querySelector(".message.user[data-inbox='3'] .queue-remove").click();
    expect(withdraw).toHaveBeenCalledWith("3", "deploy");
    await vi.waitFor(() => expect(box.querySelector("[data-inbox='3']")).toBeNull());
    event("withdrawn", { inbox_id: 4, text: "tidy up" });  // /queue drop on another page
    queue([2, "run the tests"]);
    expect(rows(box).slice(1)).toEqual([["assistant", ""], ["user", "run the tests", "Queued #1"]]);
  });

  it("keeps a message whose Remove came too late (its answer had begun)", async () => {
    withdraw.mockResolvedValueOnce(false);
    sent("build it", "c1", 1);
    event("turn_began", { kind: "user", text: "build it" });
    sent("deploy", "c2", 2);
    queue([2, "deploy"]);
    const remove = box.querySelector(".queue-remove");
    remove.click();
    await vi.waitFor(() => expect(remove.disabled).toBe(false));
    expect(box.querySelector("[data-inbox='2']")).not.toBeNull();
  });

  it("are drawn from the conversation's waiting list after a reload, before messages not yet accepted", async () => {
    view.addPending("typed while loading", "c9");
    view.renderHistory({
      messages: [{ role: "user", content: "build it", inbox_id: 1 }],
      busy: true, queued: 2,
      waiting: [{ position: 1, inbox_id: 2, text: "run the tests" }, { position: 2, inbox_id: 3, text: "deploy" }],
    });
    expect(rows(box)).toEqual([
      ["user", "build it"], ["user", "run the tests", "Queued #1"], ["user", "deploy", "Queued #2"],
      ["user", "typed while loading"],
    ]);
    event("turn_began", { kind: "user", text: "build it" });  // heard only now: not drawn twice
    event("delta", { text: "building" });
    await frame();
    expect(rows(box).map(([kind, text]) => `${kind}:${text}`)).toEqual([
      "user:build it", "assistant:building", "user:run the tests", "user:deploy", "user:typed while loading"]);
  });
});

describe("a heartbeat that found nothing changed", () => {
  let box;
  let view;
  let event;

  beforeEach(() => {
    ({ box, view, event } = newView());
  });
  const HEADER = "[Heartbeat — recurring instruction, fires every 15m]";
  const PROMPT = `${HEADER}\ncheck the deploy\n\n(This is an automatic heartbeat. Answer exactly HEARTBEAT_OK when nothing changed.)`;

  it("folds into one quiet line live, which opens to show the turn; news stays open", () => {
    event("turn_began", { kind: "heartbeat", text: PROMPT, header: HEADER });
    event("tool_started", { name: "terminal", arguments: JSON.stringify({ command: "gh run list" }) });
    event("tool_finished", { name: "terminal", content: "in progress", is_error: false });
    event("delta", { text: "HEARTBEAT_OK" });
    event("turn_ended", { kind: "heartbeat", content: "HEARTBEAT_OK", silent: true });
    event("turn_began", { kind: "heartbeat", text: PROMPT, header: HEADER });
    event("delta", { text: "The deploy failed." });
    event("turn_ended", { kind: "heartbeat", content: "The deploy failed." });
    const shown = rows(box);
    expect(shown[0][0]).toBe("fold");
    expect(shown[0][1]).toMatch(/^♥Heartbeat: nothing changed\d\d:\d\d/);
    expect(shown.slice(1).map(([kind]) => kind)).toEqual(["heartbeat", "assistant"]);
    const fold = box.querySelector(".heartbeat-fold");
    expect(fold.open).toBe(false);
    expect(fold.querySelector(".hb-prompt").textContent).toBe("check the deploy");
    expect(fold.querySelector("details.tool summary code").textContent).toBe("$ gh run list");
    expect(fold.querySelector(".message.assistant .bubble").textContent).toContain("HEARTBEAT_OK");
    fold.querySelector("summary").click();
    expect(fold.open).toBe(true);
  });

  it("folds the same way when the history is loaded", () => {
    const at = new Date(2026, 0, 5, 14, 5).getTime() / 1000;
    view.renderHistory({
      messages: [
        { role: "user", content: "watch the deploy", inbox_id: 1 },
        { role: "assistant", content: "Will do.", tool_calls: [] },
        { role: "user", content: PROMPT, heartbeat: true, header: HEADER, created_at: at },
        { role: "assistant", content: "", tool_calls: [{ name: "terminal", arguments: "{\"command\":\"gh run list\"}" }] },
        { role: "tool", tool_name: "terminal", content: "in progress" },
        { role: "assistant", content: "HEARTBEAT_OK", tool_calls: [], silent: true },
        { role: "note", content: "♥ Heartbeat ended (every 15m, fired 3 times)" },
        { role: "user", content: PROMPT, heartbeat: true, header: HEADER, created_at: at + 900 },
        { role: "assistant", content: "The deploy failed.", tool_calls: [] },
      ],
      busy: false, queued: 0,
    });
    const shown = rows(box);
    expect(shown.map(([kind]) => kind)).toEqual(["user", "assistant", "fold", "notice", "heartbeat", "assistant"]);
    const fold = box.querySelector(".heartbeat-fold");
    expect(fold.querySelector("time").textContent).toMatch(/^14:05|2:05/);
    expect(fold.querySelectorAll(".fold-body > .message").length).toBe(2);
    expect(fold.querySelector("details.tool[data-done]")).not.toBeNull();
  });
});
