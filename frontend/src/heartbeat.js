// The conversation's heartbeat as a compact badge in the header (interval and countdown), with a
// panel to change, pause, resume or clear it (each a /heartbeat command sent in the
// conversation, as if typed). No heartbeat: no badge.
import { formatCountdown } from "./dom.js";

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
    const fired = hb.fire_count ? ` It has fired ${hb.fire_count} time${hb.fire_count === 1 ? "" : "s"}.` : "";
    this.$("hb-details").textContent = `Heartbeat ${hb.status || ""}, ${every}: “${hb.prompt || ""}”.${fired}`;
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
