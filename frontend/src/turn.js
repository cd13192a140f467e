// An assistant turn: Markdown text segments interleaved with tool cards, a copy button for the
// answer, and how it ended (an error, stopped).
import { el } from "./dom.js";
import { setMarkdown } from "./markdown.js";
import { copyButton } from "./rows.js";

const STATE_TEXT = {
  waiting: "waiting for approval",
  running: "running…",
  done: "done",
  failed: "failed",
  refused: "refused",
};

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

// A refusal reads the same live and in the history: the tool says so in its result.
const REFUSED = /^(the user declined:|refused:)/;

export function setToolState(card, state) {
  card.dataset.state = state;
  card.querySelector(".tool-state").textContent = STATE_TEXT[state] || state;
  card.classList.toggle("error", state === "failed" || state === "refused");
}

// One tool call: a collapsed card with its command line and status; its output inside.
export function toolCard(name, rawArguments) {
  const card = el("details", "tool");
  card.dataset.tool = name;
  const summary = el("summary", "tool-line");
  summary.appendChild(el("span", "tool-name", name));
  summary.appendChild(el("code", null, toolLine(name, rawArguments)));
  summary.appendChild(el("span", "tool-state"));
  card.appendChild(summary);
  setToolState(card, "running");
  return card;
}

export function finishToolCard(card, content, isError) {
  const refused = card.dataset.state === "refused" || REFUSED.test(content || "");
  setToolState(card, refused ? "refused" : isError ? "failed" : "done");
  card.dataset.done = "1";
  const output = el("pre", "tool-result", content || "(no output)");
  output.tabIndex = 0;  // it scrolls: keyboard users can too
  card.appendChild(output);
}

export class AssistantTurn {
  constructor() {
    this.row = el("div", "message assistant");
    this.row.setAttribute("role", "article");
    this.row.setAttribute("aria-label", "vigil");
    this.row.vigilTurn = this;  // its copy button copies the Markdown as written
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
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (this.segment) setMarkdown(this.segment, this.text);
  }

  setText(text) {
    this.segment = null;
    this.appendText(text);
    this.flush();
  }

  addTool(name, args) {
    this.flush();
    this.segment = null;
    const card = toolCard(name, args);
    this.body.appendChild(card);
    return card;
  }

  openTools() {
    return [...this.body.querySelectorAll("details.tool:not([data-done])")];
  }

  finishTool(name, content, isError) {
    const open = this.openTools();
    const card = open.find((d) => d.dataset.tool === name) || open[0];
    if (card) finishToolCard(card, content, isError);
  }

  // Where an approval card goes: right after the tool card that waits for it.
  waitForApproval(card) {
    const tool = this.openTools().pop();
    if (tool) {
      setToolState(tool, "waiting");
      tool.after(card);
    } else {
      this.body.appendChild(card);
    }
    this.flush();
    this.segment = null;
    return tool || null;
  }

  // Waiting for the model: `event` {text, retry_at} shows a line with a countdown; null clears it.
  waiting(event) {
    clearInterval(this.waitTimer);
    this.row.querySelector(".turn-waiting")?.remove();
    if (!event) return;
    const line = el("p", "turn-waiting");
    line.setAttribute("role", "status");
    this.row.insertBefore(line, this.body.nextSibling);
    // "waiting for the model (retrying, next try in 40 s)": the seconds count down here.
    const text = String(event.text);
    const tick = () => {
      const left = Math.round((event.retry_at || 0) - Date.now() / 1000);
      const shown = event.retry_at ? text.replace(/(in )(\d+ s|a moment)(\))$/, `$1${left > 0 ? `${left} s` : "a moment"}$3`) : text;
      line.textContent = shown.charAt(0).toUpperCase() + shown.slice(1);
    };
    tick();
    if (event.retry_at) this.waitTimer = setInterval(tick, 1000);
  }

  end({ content, error, cancelled }) {
    this.waiting(null);
    this.flush();
    if (!this.allText.trim() && content) this.setText(content);
    for (const card of this.openTools()) setToolState(card, cancelled ? "refused" : "failed");
    if (error) this.body.appendChild(el("p", "turn-error", `Error: ${error}`));
    if (cancelled) this.body.appendChild(el("p", "turn-cancelled muted", "Stopped."));
    this.row.classList.remove("streaming");
    if (!this.body.childNodes.length) { this.row.remove(); return; }
    this.addActions();
  }

  addActions() {
    if (this.row.querySelector(".turn-actions") || !this.allText.trim()) return;
    const actions = el("div", "turn-actions");
    actions.appendChild(copyButton("Copy answer"));
    this.row.appendChild(actions);
  }
}
