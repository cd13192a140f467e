// The conversation list: grouped by day, or, while searching, the matches with their snippets
// (the matched words marked); or the archived conversations. Each has a ⋯ button for its actions.
import { el, dayGroup, formatClock, formatTime } from "./dom.js";

// A search snippet marks its matches «like this» (both store backends); drawn as <mark>.
export function snippetNode(snippet) {
  const node = el("span", "conv-snippet");
  const parts = String(snippet || "").split(/[«»]/);
  parts.forEach((part, i) => {
    if (!part) return;
    node.appendChild(i % 2 ? el("mark", null, part) : document.createTextNode(part));
  });
  return node;
}

// `title` with the words of `query` marked (for a match on the title itself).
export function markedTitle(title, query) {
  const node = el("span", "conv-title");
  const words = String(query || "").split(/\s+/).map((w) => w.replace(/[^\p{L}\p{N}]/gu, "")).filter(Boolean);
  if (!words.length) { node.textContent = title; return node; }
  const pattern = new RegExp(`(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})`, "giu");
  String(title).split(pattern).forEach((part, i) => {
    if (part) node.appendChild(i % 2 ? el("mark", null, part) : document.createTextNode(part));
  });
  return node;
}

function item(c, { selected, query, snippet, onSelect, onMenu }) {
  const button = el("button", "conversation");
  button.type = "button";
  button.dataset.id = c.id;
  if (selected) {
    button.classList.add("selected");
    button.setAttribute("aria-current", "true");
  }
  const title = c.title || "(untitled)";
  button.appendChild(query ? markedTitle(title, query) : el("span", "conv-title", title));
  const when = query ? formatTime(c.updated_at) : dayGroup(c.updated_at) === "Today" ? formatClock(c.updated_at) : formatTime(c.updated_at);
  const count = c.message_count ?? 0;
  const notes = [`${count} message${count === 1 ? "" : "s"}`];
  if (c.source && c.source !== "web") notes.push(c.source);
  if (c.archived) notes.push("archived");
  button.appendChild(el("span", "conv-meta", [when, ...notes].join(" · ")));
  if (snippet) button.appendChild(snippetNode(snippet));
  const badges = el("span", "conv-badges");
  if (c.heartbeat) {
    const paused = c.heartbeat.status && c.heartbeat.status !== "active";
    const badge = el("span", `conv-badge heart${paused ? " paused" : ""}`, "♥");
    badge.title = paused ? "Heartbeat paused" : "Heartbeat";
    badge.setAttribute("aria-label", badge.title);
    badge.setAttribute("role", "img");
    badges.appendChild(badge);
  }
  if (c.busy) {
    const busy = el("span", "conv-badge busy");
    busy.title = "Answering";
    busy.setAttribute("aria-label", "Answering");
    busy.setAttribute("role", "img");
    badges.appendChild(busy);
  }
  if (badges.childNodes.length) button.appendChild(badges);
  button.addEventListener("click", () => onSelect(c.id));
  const li = el("li", "conv-item");
  li.appendChild(button);
  if (onMenu) {
    const more = el("button", "conv-more", "⋯");
    more.type = "button";
    more.setAttribute("aria-label", `Actions for ${title}`);
    more.setAttribute("aria-haspopup", "menu");
    more.setAttribute("aria-expanded", "false");
    more.addEventListener("click", (e) => { e.stopPropagation(); onMenu(c, more); });
    li.appendChild(more);
  }
  return li;
}

// Draw `conversations` into `list`. `snippets`: conversation id -> snippet (a search's);
// `archived`: the list shows the archived conversations; `onMenu(c, button)` opens a
// conversation's actions.
export function drawList(list, conversations, { selectedId, query, snippets = {}, onSelect, onMenu, archived = false, onBack }) {
  list.replaceChildren();
  if (archived && onBack) {
    const back = el("button", "link-button back-to-list", "← All conversations");
    back.type = "button";
    back.addEventListener("click", onBack);
    list.appendChild(back);
  }
  if (!conversations.length) {
    const none = query ? "Nothing matches." : archived ? "No archived conversations." : "No conversations yet.";
    list.appendChild(el("p", "muted empty-list", none));
    return;
  }
  if (query || archived) {
    const n = conversations.length;
    const heading = el("h2", "conv-group", query ? `${n} ${archived ? "archived " : ""}match${n === 1 ? "" : "es"}` : `Archived · ${n}`);
    const ul = el("ul");
    for (const c of conversations) ul.appendChild(item(c, { selected: c.id === selectedId, query, snippet: snippets[c.id], onSelect, onMenu }));
    list.append(heading, ul);
    return;
  }
  let group = null;
  let ul = null;
  for (const c of conversations) {
    const name = dayGroup(c.updated_at);
    if (name !== group) {
      group = name;
      ul = el("ul");
      list.append(el("h2", "conv-group", name), ul);
    }
    ul.appendChild(item(c, { selected: c.id === selectedId, onSelect, onMenu }));
  }
}
