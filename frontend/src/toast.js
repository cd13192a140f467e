// A short message at the bottom of the page ("Archived “Trip”." with Undo), read out by screen
// readers, gone after a few seconds or when its action is taken.
import { el, button } from "./dom.js";

export const TOAST_MS = 8000;

export function toast(text, { action, onAction, ms = TOAST_MS, root = document.body } = {}) {
  let box = root.querySelector("#toasts");
  if (!box) {
    box = el("div", "toasts");
    box.id = "toasts";
    box.setAttribute("role", "status");
    box.setAttribute("aria-live", "polite");
    root.appendChild(box);
  }
  const item = el("div", "toast");
  item.appendChild(el("span", "toast-text", text));
  const close = () => { clearTimeout(item.timer); item.remove(); };
  if (action) {
    const act = button(action, "toast-action");
    act.addEventListener("click", () => { close(); onAction?.(); });
    item.appendChild(act);
  }
  const dismiss = button("×", "toast-close", { label: "Dismiss" });
  dismiss.addEventListener("click", close);
  item.appendChild(dismiss);
  box.appendChild(item);
  item.timer = setTimeout(close, ms);
  return item;
}
