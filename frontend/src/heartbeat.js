// The conversation's heartbeat as a compact badge in the header (interval and countdown), with a
// panel to change, pause, resume or clear it (each a /heartbeat command sent in the
// conversation, as if typed). No heartbeat: no badge.
import { formatCountdown } from "./dom.js";

// The panel's sentence: state, interval, instruction, then its options and how often it fired.
export function describe(hb, every = `every ${hb.interval_text || `${hb.interval}s`}`) {
  const why = hb.paused_by === "budget" ? " by vigil: its turns went over the daily token budget" : hb.paused_by ? ` by vigil (${hb.paused_by})` : "";
  const parts = [`Heartbeat ${hb.status || ""}${why}, ${every}: “${hb.prompt || ""}”.`];
  if (hb.quiet) parts.push(`Quiet ${hb.quiet}.`);
  if (hb.ends_at) parts.push(`Ends ${new Date(hb.ends_at * 1000).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })}.`);
  if (hb.loud) parts.push("Every answer is delivered.");
  if (hb.fire_count) parts.push(`It has fired ${hb.fire_count} time${hb.fire_count === 1 ? "" : "s"}.`);
  return parts.join(" ");
}

export class HeartbeatBadge {
  // `send(text)`: send a slash command in the conversation; `onEdit(hb)`: change it (a dialog).
  constructor(root, send, onEdit = () => {}) {
    this.root = root;
    this.send = send;
    this.hb = null;
    this.$ = (id) => root.querySelector(`#${id}`);
    const toggle = this.$("hb-toggle");
    toggle.addEventListener("click", () => this.open(toggle.getAttribute("aria-expanded") !== "true"));
    this.$("hb-edit").addEventListener("click", () => { this.open(false); onEdit(this.hb); });
    this.$("hb-pause").addEventListener("click", () => { this.open(false); send("/heartbeat pause"); });
    this.$("hb-resume").addEventListener("click", () => { this.open(false); send("/heartbeat resume"); });
    this.$("hb-clear").addEventListener("click", () => { this.open(false); send("/heartbeat clear"); });
    document.addEventListener("click", (e) => { if (!root.contains(e.target)) this.open(false); });
    root.addEventListener("keydown", (e) => { if (e.key === "Escape") { this.open(false); toggle.focus(); e.stopPropagation(); } });
  }

  open(yes) {
    this.$("hb-toggle").setAttribute("aria-expanded", String(Boolean(yes)));
    this.$("hb-panel").hidden = !yes;
  }

  show(hb) {
    this.hb = hb || null;
    if (!hb) {
      this.root.hidden = true;
      this.open(false);
      return;
    }
    this.root.hidden = false;
    const paused = Boolean(hb.status && hb.status !== "active");
    this.root.classList.toggle("paused", paused);
    const every = `every ${hb.interval_text || `${hb.interval}s`}`;
    this.$("hb-summary").replaceChildren(every, Object.assign(document.createElement("span"), {
      className: "hb-prompt-text", textContent: ` · “${hb.prompt || ""}”`,
    }));
    this.$("hb-details").textContent = describe(hb, every);
    this.$("hb-toggle").setAttribute("aria-label", `Heartbeat ${paused ? "paused" : "active"}, ${every}`);
    this.$("hb-pause").hidden = paused;
    this.$("hb-resume").hidden = !paused;
    this.tick();
  }

  tick(now = Date.now() / 1000) {
    const hb = this.hb;
    const out = this.$("hb-countdown");
    if (!hb) { out.textContent = ""; return; }
    if (hb.status && hb.status !== "active") { out.textContent = hb.status; return; }
    if (!hb.next_due) { out.textContent = ""; return; }
    // "next in 14m 05s"; a phone shows "in 14m 05s" (the word "next" is hidden there)
    const next = Object.assign(document.createElement("span"), { className: "hb-next", textContent: "next " });
    out.replaceChildren(next, formatCountdown(hb.next_due - now));
  }
}
