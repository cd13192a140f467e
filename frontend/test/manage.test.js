import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { cleanTitle, heartbeatCommand, untilText, askHeartbeat, ConversationActions, MAX_TITLE } from "../src/manage.js";
import { describe as describeHeartbeat } from "../src/heartbeat.js";
import { drawList } from "../src/sidebar.js";
import { openMenu, closeMenu } from "../src/menu.js";
import { replyNotice } from "../src/rows.js";
import { ConversationView } from "../src/conversation.js";

// jsdom has no <dialog> methods: open and close as a browser would, for these tests.
beforeEach(() => {
  HTMLDialogElement.prototype.showModal = function showModal() { this.open = true; };
  HTMLDialogElement.prototype.close = function close() {
    this.open = false;
    this.dispatchEvent(new Event("close"));
  };
  document.body.replaceChildren();
});

const dialog = () => document.querySelector("dialog");
const buttonNamed = (root, name) => [...root.querySelectorAll("button")].find((b) => b.textContent === name);
const submit = () => dialog().querySelector("form").requestSubmit(buttonNamed(dialog(), dialog().querySelector("button[type=submit]").textContent));

describe("the rules a title and a heartbeat follow", () => {
  it("collapses a title's whitespace and refuses empty, too long or control characters", () => {
    expect(cleanTitle("  Trip \t to\nLisbon ")).toEqual({ title: "Trip to Lisbon", error: "" });
    expect(cleanTitle("   ").error).toMatch(/must not be empty/);
    expect(cleanTitle("x".repeat(MAX_TITLE)).error).toBe("");
    expect(cleanTitle("x".repeat(MAX_TITLE + 1)).error).toMatch(/longer than 200/);
    expect(cleanTitle("evil\u202etxt").error).toMatch(/control character/);
    expect(cleanTitle("bell\u0007").error).toMatch(/control character/);
    expect(cleanTitle("family 👨‍👩‍👧").error).toBe("");  // joiners are not control characters
  });

  it("builds the /heartbeat command only from an interval and an instruction", () => {
    expect(heartbeatCommand("1H30m", "  check the CI  ")).toEqual({ command: "/heartbeat every 1h30m check the CI", error: "" });
    expect(heartbeatCommand("every day", "x").error).toMatch(/number and a unit/);
    expect(heartbeatCommand("", "x").error).toMatch(/number and a unit/);
    expect(heartbeatCommand("m", "x").error).toMatch(/number and a unit/);
    expect(heartbeatCommand("15m", "   ").error).toMatch(/what vigil should do/);
  });

  it("adds quiet hours, an end and loudness as the command's options", () => {
    expect(heartbeatCommand("2h", "look", { quiet: "22:00 – 07:00", ends: "3D", loud: true }).command)
      .toBe("/heartbeat every 2h --quiet 22:00-07:00 --for 3d --loud look");
    expect(heartbeatCommand("2h", "look", { ends: "2026-12-24 18:00" }).command).toBe("/heartbeat every 2h --until 2026-12-24 18:00 look");
    expect(heartbeatCommand("2h", "--not an option").command).toBe("/heartbeat every 2h -- --not an option");
    expect(heartbeatCommand("2h", "look", { quiet: "late" }).error).toMatch(/quiet hours/);
    expect(heartbeatCommand("2h", "look", { quiet: "25:00-07:00" }).error).toMatch(/quiet hours/);
    expect(heartbeatCommand("2h", "look", { ends: "christmas" }).error).toMatch(/duration \(3d\) or a date/);
    expect(untilText(Date.UTC(2026, 11, 24, 17, 0) / 1000)).toMatch(/^2026-12-2[45] \d\d:\d\d[+-]\d\d:\d\d$/);
  });

  it("keeps a heartbeat's options when it is changed, and says them in the panel", async () => {
    const hb = { interval: 7200, interval_text: "2h", prompt: "look", status: "active", quiet: "22:00-07:00",
      ends_at: Date.UTC(2026, 11, 24, 17, 0) / 1000, loud: true, fire_count: 1 };
    const changed = askHeartbeat(hb);
    const field = (name) => dialog().querySelector(`[name=${name}]`);
    expect(field("quiet").value).toBe("22:00-07:00");
    expect(field("answers").value).toBe("all");
    field("interval").value = "30m";
    submit();
    const command = await changed;
    expect(command).toMatch(/^\/heartbeat every 30m --quiet 22:00-07:00 --until 2026-12-2\d \d\d:\d\d[+-]\d\d:\d\d --loud look$/);
    expect(describeHeartbeat(hb)).toMatch(/^Heartbeat active, every 2h: “look”\. Quiet 22:00-07:00\. Ends .+\. Every answer is delivered\. It has fired 1 time\.$/);
    expect(describeHeartbeat({ ...hb, status: "paused", paused_by: "budget" })).toContain("paused by vigil: its turns went over the daily token budget");
  });
});

describe("ConversationActions", () => {
  let calls;
  let seen;
  let actions;
  const c = { id: "abc", title: "Trip", message_count: 4, heartbeat: null, archived: false };

  beforeEach(() => {
    calls = [];
    seen = { changed: [], deleted: [], failed: [] };
    actions = new ConversationActions({
      patch: async (id, body) => { calls.push(["patch", id, body]); return { ...c, ...body }; },
      remove: async (id) => { calls.push(["delete", id]); return { id, sessions: 1, messages: 4 }; },
    }, {
      changed: (s) => seen.changed.push(s),
      deleted: (g) => seen.deleted.push(g),
      failed: (t) => seen.failed.push(t),
    });
  });
  afterEach(() => vi.useRealTimers());

  it("renames after the dialog, keeping it open while the title breaks a rule", async () => {
    const renamed = actions.rename(c);
    const field = dialog().querySelector("input");
    expect(field.value).toBe("Trip");
    field.value = "  ";
    submit();
    expect(dialog().querySelector(".dialog-error").textContent).toMatch(/must not be empty/);
    expect(calls).toEqual([]);
    field.value = " Trip  to Lisbon ";
    submit();
    expect((await renamed).title).toBe("Trip to Lisbon");
    expect(calls).toEqual([["patch", "abc", { title: "Trip to Lisbon" }]]);
    expect(dialog()).toBeNull();
  });

  it("sends nothing when a dialog is cancelled", async () => {
    const renamed = actions.rename(c);
    buttonNamed(dialog(), "Cancel").click();
    expect(await renamed).toBeNull();
    const removed = actions.remove(c);
    expect(dialog().textContent).toContain("“Trip” and its 4 messages will be deleted for good. This cannot be undone.");
    buttonNamed(dialog(), "Cancel").click();
    expect(await removed).toBeNull();
    expect(calls).toEqual([]);
  });

  it("deletes only after the confirmation and says so", async () => {
    const removed = actions.remove({ ...c, heartbeat: { interval: 60 } });
    expect(dialog().textContent).toContain("and its heartbeat cleared");
    submit();
    expect(await removed).toEqual({ id: "abc", sessions: 1, messages: 4 });
    expect(calls).toEqual([["delete", "abc"]]);
    expect(seen.deleted).toHaveLength(1);
    expect(document.querySelector(".toast").textContent).toContain("Deleted “Trip”.");
  });

  it("archives at once, and Undo in the toast brings it back", async () => {
    await actions.archive(c);
    expect(calls).toEqual([["patch", "abc", { archived: true }]]);
    buttonNamed(document.querySelector(".toast"), "Undo").click();
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    expect(calls[1]).toEqual(["patch", "abc", { archived: false }]);
    expect(seen.changed.map((s) => s.archived)).toEqual([true, false]);
  });

  it("says why a change failed", async () => {
    actions.api.patch = async () => { throw new Error("the gateway cannot be reached"); };
    expect(await actions.archive(c)).toBeNull();
    expect(seen.failed).toEqual(["Could not archive: the gateway cannot be reached"]);
  });
});

describe("the list's actions", () => {
  it("gives each conversation a ⋯ button that opens its menu, and says when nothing is archived", () => {
    const list = document.createElement("div");
    document.body.appendChild(list);
    const opened = [];
    drawList(list, [{ id: "a", title: "First", updated_at: Date.now() / 1000 }], {
      onSelect: () => {}, onMenu: (c, button) => opened.push([c.id, button.getAttribute("aria-label")]),
    });
    list.querySelector(".conv-more").click();
    expect(opened).toEqual([["a", "Actions for First"]]);
    drawList(list, [], { onSelect: () => {}, archived: true });
    expect(list.textContent).toBe("No archived conversations.");
    drawList(list, [{ id: "b", title: "Old", updated_at: 1 }], { onSelect: () => {}, archived: true });
    expect(list.querySelector(".conv-group").textContent).toBe("Archived · 1");
  });

  it("opens a menu with arrow keys and Esc, and runs the chosen item", () => {
    const opener = document.createElement("button");
    document.body.appendChild(opener);
    const ran = [];
    const menu = openMenu(opener, [{ label: "Rename…", run: () => ran.push("rename") }, null, { label: "Delete…", run: () => ran.push("delete") }], "Actions");
    expect(opener.getAttribute("aria-expanded")).toBe("true");
    expect([...menu.querySelectorAll("[role=menuitem]")].map((b) => b.textContent)).toEqual(["Rename…", "Delete…"]);
    expect(document.activeElement.textContent).toBe("Rename…");
    menu.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    expect(document.activeElement.textContent).toBe("Delete…");
    document.activeElement.click();
    expect(ran).toEqual(["delete"]);
    expect(document.querySelector(".menu")).toBeNull();
    openMenu(opener, [{ label: "Rename…", run: () => {} }], "Actions");
    document.querySelector(".menu").dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(document.querySelector(".menu")).toBeNull();
    expect(document.activeElement).toBe(opener);
    closeMenu();
  });
});

describe("Retry on an answer that failed", () => {
  it("sends the message again for a notice of a message given up on, /retry N for one set aside", () => {
    const sent = [];
    const failed = replyNotice("⚠ The model refused this message (HTTP 400: no), so vigil cannot answer it.", (t) => sent.push(t), { original: "tell me about kites" });
    failed.querySelector("button.retry").click();
    const aside = replyNotice("⚠ vigil set this message aside ... Send /retry 42 to try it again", (t) => sent.push(t), { original: "x" });
    aside.querySelector("button.retry").click();
    expect(sent).toEqual(["tell me about kites", "/retry 42"]);
    expect(failed.querySelector("button.retry").disabled).toBe(true);
  });

  it("offers no Retry for a message that is kept and waits (no model yet)", () => {
    const waiting = replyNotice("⚠ vigil cannot answer yet. No model is configured ... Your message is kept", () => {}, { original: "hello" });
    expect(waiting.querySelector("button.retry")).toBeNull();
  });

  it("finds the failed message's text by its inbox id, never a command's", () => {
    const box = document.createElement("section");
    document.body.appendChild(box);
    const sent = [];
    const view = new ConversationView(box, { send: (t) => sent.push(t) });
    view.handle({ type: "message_accepted", inbox_id: 7, text: "tell me about kites", client_id: "c1" });
    view.handle({ type: "message_accepted", inbox_id: 8, text: "/model other", client_id: "c2" });
    expect(view.failedText(7)).toBe("tell me about kites");
    expect(view.failedText(8)).toBe("");
    view.handle({ type: "reply", kind: "notice", inbox_id: 7, text: "⚠ vigil cannot answer this message: boom" });
    box.querySelector("button.retry").click();
    expect(sent).toEqual(["tell me about kites"]);
  });
});
