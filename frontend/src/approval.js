// An approval request: what the agent wants to do, Approve / Deny, and a countdown (with a bar)
// to the automatic denial.
import { el, button, formatCountdown } from "./dom.js";

export function approvalCard(event, decide, now = () => Date.now() / 1000) {
  const card = el("div", "approval");
  card.dataset.approval = event.id;
  card.setAttribute("role", "group");
  card.setAttribute("aria-label", "Approval needed");
  card.appendChild(el("p", "approval-title", `Waiting for your approval to run ${event.tool}`));
  card.appendChild(el("p", "approval-why muted",
    "It needs to leave the sandbox. Nothing runs until you approve; if nobody answers it is denied."));
  card.appendChild(el("pre", "approval-description", event.description || ""));
  const bar = el("div", "approval-bar");
  const fill = el("div", "approval-bar-fill");
  bar.appendChild(fill);
  bar.setAttribute("aria-hidden", "true");
  const actions = el("div", "approval-actions");
  const approve = button("Approve", "primary");
  const deny = button("Deny", "danger");
  const countdown = el("span", "approval-countdown muted");
  countdown.setAttribute("aria-live", "off");
  actions.append(approve, deny, countdown);
  card.append(bar, actions);
  const total = Math.max(1, (event.expires_at || 0) - now());
  const tick = () => {
    const left = (event.expires_at || 0) - now();
    countdown.textContent = left > 0 ? `denied automatically ${formatCountdown(left)}` : "timed out";
    fill.style.width = `${Math.max(0, Math.min(100, (left / total) * 100))}%`;
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
  card.querySelector(".approval-title").textContent = approved ? "Approved" : "Denied";
  card.classList.add(approved ? "approved" : "denied");
}
