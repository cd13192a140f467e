// The rows of a conversation other than the assistant's turns: the person's messages, heartbeat
// markers, notices, command replies, files and cron answers. Text goes in through textContent.
import { el, button, formatSize, formatClock } from "./dom.js";

export function userBubble(text, { pending = false, inbox = null } = {}) {
  const row = el("div", "message user");
  if (inbox !== null && inbox !== undefined) row.dataset.inbox = String(inbox);
  row.setAttribute("role", "article");
  row.setAttribute("aria-label", "You");
  row.appendChild(el("div", "bubble", text));
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

// A heartbeat turn that found nothing changed (it answered exactly HEARTBEAT_OK): one quiet
// line that opens, on a click, to show the turn (`rows`: its marker and its answer). `when`:
// the epoch seconds it fired.
export function heartbeatFold(rows, when) {
  const fold = el("details", "message heartbeat-fold");
  const line = el("summary", "fold-line");
  line.appendChild(el("span", "hb-icon", "♥"));
  line.appendChild(el("span", "fold-text", "Heartbeat: nothing changed"));
  if (when) {
    const time = el("time", "fold-time", formatClock(when));
    time.dateTime = new Date(when * 1000).toISOString();
    line.appendChild(time);
  }
  fold.appendChild(line);
  const body = el("div", "fold-body");
  body.append(...rows);
  fold.appendChild(body);
  return fold;
}

export function notice(text, { error = false, pre = false, kind = "" } = {}) {
  const row = el("div", `message notice${error ? " error" : ""}${kind ? ` ${kind}` : ""}`);
  row.setAttribute("role", "article");
  row.appendChild(el(pre ? "pre" : "p", "notice-text", text));
  return row;
}

const HELP_LINE = /^\s+(\/\S+(?: \S+)*?)\s{2,}(.+)$/;
const NOT_HERE = new Set(["/quit"]);

// `/help`'s reply as a list of commands (it is laid out in columns for a terminal); `null` when
// the text is not a help listing.
export function helpList(text) {
  const lines = String(text || "").split("\n");
  if (lines[0] !== "Commands:") return null;
  const list = el("dl", "help-list");
  for (const line of lines.slice(1)) {
    const m = HELP_LINE.exec(line);
    if (!m) continue;
    if (NOT_HERE.has(m[1].split(" ")[0])) continue;
    list.append(el("dt", null, m[1]), el("dd", null, m[2].replace(/\s*\(alias [^)]*\)$/, "")));
  }
  return list.children.length ? list : null;
}

export function commandReply(text, isError) {
  const list = isError ? null : helpList(text);
  if (!list) return notice(text, { error: isError, pre: true, kind: "command" });
  const row = el("div", "message notice command help");
  row.setAttribute("role", "article");
  row.setAttribute("aria-label", "Commands");
  row.append(el("p", "help-title", "Commands"), list);
  return row;
}

const RETRY = /\/retry (\d+)/;
// The gateway's notices for a message it gave up on (gateway/settle.py): they advise sending it
// again. "vigil cannot answer yet ... Your message is kept" is not one: that message waits.
export const GAVE_UP = /^⚠ (vigil stopped trying to answer this message|The model provider refused|The model refused this message|vigil cannot answer this message)/;

// A notice the gateway sent instead of an answer ("No model is configured ...", a message set
// aside, a message that failed for good). One that names `/retry N` gets a Retry button that
// puts the set-aside message back; one about a message that failed (`original`: its text, as
// shown above) gets a Retry button that sends that text again, as the notice advises.
export function replyNotice(text, send, { original = "" } = {}) {
  const row = notice(text, { error: true, kind: "reply-notice" });
  const retry = RETRY.exec(text);
  if (!GAVE_UP.test(text)) original = "";
  const again = retry || original ? button("Retry", "small retry", { label: "Retry: send the message again" }) : null;
  if (again) {
    again.addEventListener("click", () => { again.disabled = true; send(retry ? `/retry ${retry[1]}` : original); });
    row.appendChild(again);
  }
  return row;
}

export function fileLink(event) {
  const row = el("div", "message notice file");
  row.setAttribute("role", "article");
  const link = el("a", "file-link", `⬇ ${event.name || "file"}`);
  link.href = event.url;
  link.setAttribute("download", event.name || "");
  row.appendChild(link);
  if (event.size) row.appendChild(el("span", "muted", ` (${formatSize(event.size)})`));
  if (event.text) row.appendChild(el("p", "notice-text", event.text));
  return row;
}

export function cronNotice(event) {
  const row = el("div", "message notice cron");
  row.setAttribute("role", "article");
  const link = el("a", "cron-link", `Cron job ${event.job || ""} answered`);
  link.href = `#${event.session_id}`;
  row.appendChild(link);
  row.appendChild(el("p", "notice-text", (event.text || "").slice(0, 280)));
  return row;
}

export function copyButton(label = "Copy") {
  const copy = button("Copy", "copy", { label });
  copy.dataset.copy = "answer";
  return copy;
}
