// Notes vigil leaves in a conversation, which are no answer to the message above them: the
// answer of a `/background` task ("↳ background: “PROMPT”", then the answer), and what became of
// a heartbeat vigil ended or paused by itself ("♥ Heartbeat ended …"). Each is marked as what it
// is, so it never reads as the answer to the message above it.
import { el } from "./dom.js";
import { setMarkdown } from "./markdown.js";
import { copyButton } from "./rows.js";

const BACKGROUND = /^↳ background: “([\s\S]*?)”/;
const STATUS_TEXT = { answered: "answered", failed: "failed", interrupted: "interrupted" };

// Which kind of note `text` is: "background", "heartbeat" or "" (another notice).
export function noteKind(text, { reason = "", background = null } = {}) {
  if (reason === "background" || background || BACKGROUND.test(text || "")) return "background";
  if (reason === "ended" || reason === "over_budget" || /^♥ Heartbeat /.test(text || "")) return "heartbeat";
  return "";
}

// A note's row. `status`: a background task's (answered, failed, interrupted), when known.
export function noteRow(text, { status = "" } = {}) {
  text = String(text || "");
  return noteKind(text) === "background" ? backgroundNote(text, status) : heartbeatNote(text);
}

function backgroundNote(text, status) {
  const found = BACKGROUND.exec(text);
  const prompt = found ? found[1] : "";
  const rest = found ? text.slice(found[0].length) : text;
  const answered = status ? status === "answered" : rest.startsWith("\n\n");
  const row = el("div", "message note background-note");
  row.setAttribute("role", "article");
  row.setAttribute("aria-label", "Background task");
  const head = el("p", "note-head");
  head.appendChild(el("span", "note-label", "↳ Background task"));
  const state = status || (answered ? "answered" : /^ was interrupted/.test(rest) ? "interrupted" : "failed");
  head.appendChild(el("span", `note-status ${state}`, STATUS_TEXT[state] || state));
  row.appendChild(head);
  if (prompt) row.appendChild(el("p", "note-prompt", `“${prompt}”`));
  const body = el("div", "bubble");
  if (answered) {
    const answer = rest.replace(/^\n+/, "");
    const markdown = el("div", "markdown");
    setMarkdown(markdown, answer);
    body.appendChild(markdown);
    row.vigilTurn = { allText: answer };  // its Copy button copies the answer as written
    row.appendChild(body);
    const actions = el("div", "turn-actions");
    actions.appendChild(copyButton("Copy the background answer"));
    row.appendChild(actions);
  } else {
    const said = rest.trim();  // "failed (session …): why", "was interrupted before it answered …"
    body.appendChild(el("p", "note-text", said.charAt(0).toUpperCase() + said.slice(1)));
    row.appendChild(body);
  }
  return row;
}

function heartbeatNote(text) {
  const row = el("div", "message note heartbeat-note");
  row.setAttribute("role", "article");
  row.setAttribute("aria-label", "Heartbeat note");
  row.appendChild(el("p", "note-text", text));
  return row;
}
