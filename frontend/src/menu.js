// A small menu of actions that opens from a button (a conversation's ⋯): arrow keys move, Esc
// and a click elsewhere close it, focus goes back to the button.
import { el } from "./dom.js";

let current = null;

export function closeMenu() {
  const menu = current;
  current = null;
  if (!menu) return;
  menu.remove();
  menu.opener.setAttribute("aria-expanded", "false");
}

// `items`: [{label, run, danger}] (falsy entries are skipped).
export function openMenu(opener, items, label) {
  const reopening = current?.opener === opener;
  closeMenu();
  if (reopening) return null;
  const menu = el("div", "menu");
  menu.setAttribute("role", "menu");
  menu.setAttribute("aria-label", label);
  menu.opener = opener;
  for (const item of items.filter(Boolean)) {
    const entry = el("button", `menu-item${item.danger ? " danger-text" : ""}`, item.label);
    entry.type = "button";
    entry.setAttribute("role", "menuitem");
    entry.tabIndex = -1;
    entry.addEventListener("click", (e) => { e.stopPropagation(); closeMenu(); opener.focus(); item.run(); });
    menu.appendChild(entry);
  }
  menu.addEventListener("keydown", (e) => {
    const entries = [...menu.querySelectorAll(".menu-item")];
    const at = entries.indexOf(document.activeElement);
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      entries[(at + (e.key === "ArrowDown" ? 1 : entries.length - 1)) % entries.length].focus();
    } else if (e.key === "Escape" || e.key === "Tab") {
      e.preventDefault();
      e.stopPropagation();
      closeMenu();
      opener.focus();
    }
  });
  document.body.appendChild(menu);
  const box = opener.getBoundingClientRect();
  const width = menu.offsetWidth;
  menu.style.top = `${Math.min(box.bottom + 4, window.innerHeight - menu.offsetHeight - 8)}px`;
  menu.style.left = `${Math.max(8, Math.min(box.right - width, window.innerWidth - width - 8))}px`;
  opener.setAttribute("aria-expanded", "true");
  current = menu;
  menu.querySelector(".menu-item")?.focus();
  return menu;
}

document.addEventListener("click", (e) => {
  if (current && !current.contains(e.target) && !current.opener.contains(e.target)) closeMenu();
});
window.addEventListener("resize", closeMenu);
