// Building the conversation's elements. Text only ever goes in through textContent or the
// safe Markdown renderer.

import { renderMarkdown } from "./markdown.js";

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

export function formatTime(epochSeconds) {
  if (!epochSeconds) return "";
  const date = new Date(epochSeconds * 1000);
  return date.toLocaleString([], { dateStyle: "short", timeStyle: "short" });
}

export function formatCountdown(seconds) {
  if (seconds <= 0) return "due now";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  if (h) return `in ${h}h ${String(m).padStart(2, "0")}m`;
  if (m) return `in ${m}m ${String(r).padStart(2, "0")}s`;
  return `in ${r}s`;
}

export function userBubble(text, { pending = false, inbox = null } = {}) {
  const row = el("div", "message user");
  if (inbox !== null && inbox !== undefined) row.dataset.inbox = String(inbox);
  row.setAttribute("role", "article");
  row.setAttribute("aria-label", "You");
  const bubble = el("div", "bubble", text);
  row.appendChild(bubble);
  if (pending) row.classList.add("pending");
  return row;
}

// A heartbeat's turn: its header line, then its instruction (the header is not repeated).
export function heartbeatMarker(header, text) {
  const row = el("div", "message heartbeat-turn");
  row.setAttribute("role", "article");
  row.setAttribute("aria-label", "Heartbeat");
  let body = String(text || "");
  const firstLine = body.split("\n", 1)[0];
  if (header && firstLine.trim() === header.trim()) body = body.slice(firstLine.length).replace(/^\n+/, "");
  // The closing "(This is an automatic heartbeat ...)" note is for the model, not the reader.
  body = body.replace(/\n\n\([^()]*\)\s*$/, "");
  row.appendChild(el("div", "hb-header", `♥ ${(header || "Heartbeat").replace(/^\[|\]$/g, "")}`));
  if (body.trim()) row.appendChild(el("div", "hb-prompt", body.trim()));
  return row;
}

export function notice(text, { error = false, pre = false } = {}) {
  const row = el("div", `message notice${error ? " error" : ""}`);
  row.setAttribute("role", "article");
  row.appendChild(el(pre ? "pre" : "p", "notice-text", text));
  return row;
}

function argumentsOf(raw) {
  if (raw && typeof raw === "object") return raw;
  try { return JSON.parse(raw || "{}"); } catch { return { arguments: String(raw) }; }
}

export function toolLine(name, rawArguments) {
  const args = argumentsOf(rawArguments);
  if (typeof args.command === "string") return `$ ${args.command}`;
  const shown = Object.entries(args).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(" ");
  return `${name}${shown ? " " + shown : ""}`;
}

// One tool call: a collapsed `$ command` line; its result inside when it arrives.
export function toolBlock(name, rawArguments) {
  const details = el("details", "tool");
  details.dataset.tool = name;
  const summary = el("summary", "tool-line");
  summary.appendChild(el("code", null, toolLine(name, rawArguments)));
  summary.appendChild(el("span", "tool-state", "running…"));
  details.appendChild(summary);
  return details;
}

export function finishTool(details, content, isError) {
  details.querySelector(".tool-state").textContent = isError ? "failed" : "done";
  if (isError) details.classList.add("error");
  details.dataset.done = "1";
  details.appendChild(el("pre", "tool-result", content || "(no output)"));
}

// An assistant turn: text segments interleaved with tool blocks.
export class AssistantTurn {
  constructor() {
    this.row = el("div", "message assistant");
    this.row.setAttribute("role", "article");
    this.row.setAttribute("aria-label", "vigil");
    this.body = el("div", "bubble");
    this.row.appendChild(this.body);
    this.segment = null;
    this.text = "";
    this.allText = "";
    this.frame = 0;
  }

  appendText(delta) {
    if (!this.segment) {
      this.segment = el("div", "markdown");
      this.body.appendChild(this.segment);
      this.text = "";
    }
    this.text += delta;
    this.allText += delta;
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    if (this.segment) this.segment.replaceChildren(renderMarkdown(this.text));
  }

  setText(text) {
    this.segment = null;
    this.appendText(text);
    this.flush();
  }

  addTool(name, args) {
    this.flush();
    this.segment = null;
    const block = toolBlock(name, args);
    this.body.appendChild(block);
    return block;
  }

  finishTool(name, content, isError) {
    const open = [...this.body.querySelectorAll("details.tool:not([data-done])")];
    const block = open.find((d) => d.dataset.tool === name) || open[0];
    if (block) finishTool(block, content, isError);
  }

  end({ content, error, cancelled }) {
    this.flush();
    if (!this.allText.trim() && content) this.setText(content);
    if (error) this.body.appendChild(el("p", "turn-error", `Error: ${error}`));
    if (cancelled) this.body.appendChild(el("p", "turn-cancelled muted", "(stopped)"));
    this.row.classList.remove("streaming");
    if (!this.body.childNodes.length) this.row.remove();
  }
}

// An approval request with Approve/Deny and a countdown to the automatic denial.
export function approvalCard(event, decide) {
  const card = el("div", "message approval");
  card.dataset.approval = event.id;
  card.setAttribute("role", "group");
  card.setAttribute("aria-label", "Approval needed");
  card.appendChild(el("p", "approval-title", `Approve running ${event.tool}?`));
  card.appendChild(el("pre", "approval-description", event.description || ""));
  const actions = el("div", "approval-actions");
  const approve = el("button", "primary", "Approve");
  const deny = el("button", "danger", "Deny");
  approve.type = deny.type = "button";
  const countdown = el("span", "approval-countdown muted");
  actions.append(approve, deny, countdown);
  card.appendChild(actions);
  const tick = () => {
    const left = (event.expires_at || 0) - Date.now() / 1000;
    countdown.textContent = left > 0 ? `denied automatically ${formatCountdown(left)}` : "timed out";
    if (left <= 0) clearInterval(card.timer);
  };
  card.timer = setInterval(tick, 1000);
  tick();
  approve.addEventListener("click", () => decide(event.id, true, card));
  deny.addEventListener("click", () => decide(event.id, false, card));
  return card;
}

export function resolveApproval(card, approved, text) {
  clearInterval(card.timer);
  card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  card.querySelector(".approval-countdown").textContent = text || (approved ? "approved" : "denied");
  card.classList.add(approved ? "approved" : "denied");
}
