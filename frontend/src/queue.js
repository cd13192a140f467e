// The messages waiting behind the running turn, as the gateway lists them (its "queue" events and
// a conversation's `waiting`): each one's row below the turn is numbered in the order it will be
// handled and has a Remove button that withdraws it, as `/queue drop N` does. DOM only.
import { el, button } from "./dom.js";

// Mark `row` (a person's message drawn below the turn) as waiting at `position`; `onRemove()`
// is called by its Remove button (none without one: a message with no inbox id).
export function markWaiting(row, position, onRemove) {
  row.classList.add("queued");
  row.dataset.position = String(position);
  let line = row.querySelector(".queue-line");
  if (!line) {
    line = el("div", "queue-line");
    line.appendChild(el("span", "queue-label"));
    row.appendChild(line);
  }
  line.querySelector(".queue-label").textContent = `Queued #${position}`;
  let remove = line.querySelector(".queue-remove");
  if (onRemove && !remove) {
    remove = button("Remove", "queue-remove link-button");
    remove.addEventListener("click", () => onRemove(remove));
    line.appendChild(remove);
  }
  if (remove) {
    const text = row.querySelector(".bubble")?.textContent || "";
    remove.setAttribute("aria-label", `Remove waiting message ${position}: ${short(text)}`);
  }
  return row;
}

// The row's turn began (or it is no longer listed): an ordinary message again.
export function unmarkWaiting(row) {
  row.classList.remove("queued");
  delete row.dataset.position;
  row.querySelector(".queue-line")?.remove();
  return row;
}

export function short(text, width = 60) {
  const line = String(text || "").split(/\s+/).filter(Boolean).join(" ");
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}
