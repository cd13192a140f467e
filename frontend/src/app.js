// The page: which conversation is shown, its live stream, the list, the composer and the
// keyboard. The parts are in their own modules; this wires them to the gateway's API.
import { getJSON, postJSON, sendJSON, upload, LiveStream, HttpError } from "./api.js";
import { el, button, newClientId, formatSize, copyText } from "./dom.js";
import { ConversationView } from "./conversation.js";
import { drawList } from "./sidebar.js";
import { HeartbeatBadge } from "./heartbeat.js";
import { Composer } from "./composer.js";
import { cronNotice, notice } from "./rows.js";
import { wireTheme } from "./theme.js";
import { ConversationActions, askHeartbeat } from "./manage.js";
import { openMenu } from "./menu.js";
import { toast } from "./toast.js";
import { short } from "./queue.js";

const $ = (id) => document.getElementById(id);
const NARROW = window.matchMedia("(max-width: 760px)");
const HEARTBEAT_IDEA = "/heartbeat every 1h ";  // opens the heartbeat dialog
const SUGGESTIONS = [
  ["What can you do?", "What can you do for me, and what can you not?"],
  ["Set a heartbeat", HEARTBEAT_IDEA],
  ["List the commands", "/help"],
];

const state = {
  id: null,
  shown: null,      // the open conversation as last loaded (title, heartbeat, archived ...)
  stream: null,
  opening: Promise.resolve(),
  listed: [],
  archived: false,  // the list shows the archived conversations
};

let view;
let composer;
let badge;
let actions;

function showError(text) { $("composer-error").textContent = text || ""; }

function showStatus(busy, queued) {
  const parts = [];
  if (busy) parts.push("thinking…");
  if (queued) parts.push(`${queued} queued`);
  $("status").textContent = parts.join(" · ");
  composer.setBusy(busy);
}

function showConnection(text) {
  const live = text === "live";
  $("connection").textContent = live ? "" : text.startsWith("reconnecting") ? `offline, ${text}` : text;
  const dot = $("connection-dot");
  dot.classList.toggle("live", live);
  dot.setAttribute("aria-label", live ? "Connected" : "Not connected");
}

// -- the list ---------------------------------------------------------------------------------

let searchTimer = 0;
let listTimer = 0;

async function loadList() {
  const q = $("search").value.trim();
  let data;
  let snippets = {};
  const archived = state.archived;
  try {
    const list = getJSON(`/api/conversations?limit=200${archived ? "&archived=1" : ""}${q ? `&q=${encodeURIComponent(q)}` : ""}`);
    const found = q ? getJSON(`/api/search?q=${encodeURIComponent(q)}`).catch(() => null) : null;
    data = await list;
    const hits = found ? await found : null;
    for (const hit of hits?.results || []) if (!(hit.id in snippets)) snippets[hit.id] = hit.snippet;
  } catch { return; }
  if ($("search").value.trim() !== q || state.archived !== archived) return;  // changed meanwhile
  state.listed = data.conversations;
  drawList($("conversation-list"), data.conversations, {
    selectedId: state.id, query: q, snippets, onSelect: choose, onMenu: listMenu, archived, onBack: toggleArchived,
  });
  const shown = data.conversations.find((c) => c.id === state.id);
  if (shown) showTitle({ ...state.shown, ...shown });  // a title is given after the first answer
}

// -- renaming, archiving, deleting, the heartbeat from controls --------------------------------

function showTitle(c) {
  if (!c) return;
  state.shown = c;
  $("title").textContent = c.title || "(untitled)";
  const notes = [];
  if (c.source && c.source !== "web") notes.push(`from ${c.source}`);
  if (c.archived) notes.push("archived");
  $("subtitle").textContent = notes.join(" · ");
}

function menuItems(c, { withHeartbeat = false } = {}) {
  return [
    { label: "Rename…", run: () => actions.rename(c) },
    withHeartbeat && { label: c.heartbeat ? "Change heartbeat…" : "Set a heartbeat…", run: () => editHeartbeat(c.heartbeat) },
    { label: c.archived ? "Unarchive" : "Archive", run: () => actions.archive(c, !c.archived) },
    { label: "Delete…", run: () => actions.remove(c), danger: true },
  ];
}

function listMenu(c, opener) {
  openMenu(opener, menuItems(c), `Actions for ${c.title || "(untitled)"}`);
}

function headerMenu() {
  if (!state.id || !state.shown) return;
  openMenu($("conversation-menu"), menuItems({ ...state.shown }, { withHeartbeat: true }), "Conversation actions");
}

async function editHeartbeat(current) {
  const command = await askHeartbeat(current);
  if (command) send(command);
}

function toggleArchived() {
  state.archived = !state.archived;
  $("show-archived").setAttribute("aria-pressed", String(state.archived));
  loadList();
}

function onChanged(summary) {
  if (summary.id === state.id) showTitle({ ...state.shown, ...summary });
  loadList();
}

function forgetShown() {
  if (state.stream) state.stream.close();
  state.stream = null;
  state.id = null;
  state.shown = null;
  history.replaceState(null, "", location.pathname);
  $("title").textContent = "vigil";
  $("subtitle").textContent = "";
  $("conversation-menu").hidden = true;
  badge.show(null);
  showStatus(false, 0);
  welcome();
}

function onDeleted(gone) {
  if (gone.id === state.id) forgetShown();
  loadList();
}

function refreshListSoon() {
  clearTimeout(listTimer);
  listTimer = setTimeout(loadList, 400);
}

function choose(id) {
  closeSidebar();
  select(id);
}

// -- one conversation -------------------------------------------------------------------------

function welcome() {
  view.clear();
  const box = view.showEmpty("What can I do for you?");
  box.appendChild(el("p", "muted", "Ask anything. vigil keeps every conversation, can run commands in its sandbox, and can act on a schedule with a heartbeat."));
  const ideas = el("div", "suggestions");
  for (const [label, text] of SUGGESTIONS) {
    const idea = button(label, "suggestion");
    idea.addEventListener("click", () => (text === HEARTBEAT_IDEA ? editHeartbeat(null) : composer.fill(text)));
    ideas.appendChild(idea);
  }
  box.appendChild(ideas);
}

async function loadView(id) {
  const shown = await getJSON(`/api/conversations/${encodeURIComponent(id)}`);
  if (state.id !== id) return shown;  // another conversation was chosen meanwhile
  if (shown.id !== state.id) {
    state.id = shown.id;
    history.replaceState(null, "", `#${shown.id}`);
  }
  const { messages = [], ...summary } = shown;
  showTitle({ ...summary, message_count: messages.length });
  $("conversation-menu").hidden = false;
  view.renderHistory(shown);
  badge.show(shown.heartbeat);
  return shown;
}

async function select(id) {
  if (state.stream) state.stream.close();
  state.id = id;
  state.shown = null;
  view.clear();
  badge.show(null);
  showStatus(false, 0);
  history.replaceState(null, "", `#${id}`);
  showError("");
  for (const b of document.querySelectorAll("#conversation-list .conversation")) {
    const chosen = b.dataset.id === id;
    b.classList.toggle("selected", chosen);
    if (chosen) b.setAttribute("aria-current", "true"); else b.removeAttribute("aria-current");
  }
  // Subscribe before loading the history, so nothing happening between the two is missed; a
  // message typed meanwhile waits for both (state.opening).
  const stream = new LiveStream(id, {
    onEvent: handle,
    onState: showConnection,
    onReconnect: () => loadView(state.id).catch(() => {}),
  });
  state.stream = stream;
  const opening = (async () => {
    await Promise.race([stream.ready, new Promise((resolve) => setTimeout(resolve, 3000))]);
    await loadView(id);
  })();
  state.opening = opening.catch(() => {});
  try {
    await opening;
  } catch (err) {
    stream.close();
    if (state.stream === stream) state.stream = null;
    showError(err instanceof HttpError && err.status === 404 ? "That conversation does not exist." : String(err.message));
    return;
  }
  loadList();
  if (!NARROW.matches) $("input").focus();
}

async function decide(id, approve, card) {
  try {
    await postJSON(`/api/approvals/${encodeURIComponent(id)}`, { approve }, { attempts: 2 });
    view.resolved(card, approve);
  } catch (err) {
    view.resolved(card, false, err.status === 404 ? "no longer pending" : `could not answer: ${err.message}`);
  }
}

function handle(event) {
  if (event.type === "reply" && event.kind === "cron" && event.session_id !== state.id) {
    view.append(cronNotice(event));  // every open page hears of a cron answer; the link opens its run
    refreshListSoon();
    return;
  }
  if (event.session_id && state.id && event.session_id !== state.id && event.type !== "session_moved") return;
  switch (event.type) {
    case "heartbeat":
      badge.show(event.heartbeat);
      if (state.shown) state.shown.heartbeat = event.heartbeat || null;
      refreshListSoon();
      break;
    case "renamed":
      showTitle({ ...state.shown, title: event.title });
      refreshListSoon();
      break;
    case "conversation_deleted":  // deleted here or on another page
      if (event.session_id === state.id) {
        forgetShown();
        toast("This conversation was deleted.");
      }
      refreshListSoon();
      break;
    case "session_moved":
      if (!event.new_session_id) {
        view.append(notice(event.reason === "suspend"
          ? "This conversation was suspended (/suspend) and its heartbeat cleared. Send a message to reopen it, or start a new one."
          : "This conversation has ended. Start a new one, or send a message to reopen it."));
        badge.show(null);
        refreshListSoon();
        break;
      }
      view.append(notice(event.reason === "compression"
        ? "The conversation was compressed; it continues in a new session."
        : "Switched to another conversation."));
      select(event.new_session_id);
      break;
    case "stale":  // another gateway worker had more to say than it could pass on live
      loadView(state.id).catch(() => {});
      break;
    default:
      view.handle(event);
  }
}

// -- sending and stopping ---------------------------------------------------------------------

async function ensureConversation() {
  if (state.id) return state.id;
  const created = await postJSON("/api/conversations", {});
  await select(created.id);
  return created.id;
}

function mention(saved) {
  return `I uploaded ${saved.name} (${formatSize(saved.size)}) into the working directory.`;
}

// Send `text` (and `files`, uploaded first); `false` when nothing was sent.
async function send(text, files = []) {
  showError("");
  let id;
  try {
    id = await ensureConversation();
  } catch (err) {
    showError(`Could not start a conversation: ${err.message}`);
    return false;
  }
  await state.opening;
  const notes = [];
  for (const file of files) {
    try {
      notes.push(mention(await upload(`/api/conversations/${encodeURIComponent(id)}/files`, file)));
    } catch (err) {
      showError(`Could not upload ${file.name}: ${err.message}`);
      return false;
    }
  }
  const full = [text.trim() ? text : "", ...notes].filter(Boolean).join("\n\n");
  const clientId = newClientId();
  view.addPending(full, clientId);
  try {
    await postJSON(`/api/conversations/${encodeURIComponent(id)}/messages`, { text: full, client_id: clientId });
  } catch (err) {
    view.failPending(clientId, err.message);
  }
  return true;
}

// A waiting message's Remove button: withdrawn as `/queue drop N` withdraws it (the gateway
// records it so); whether it was.
async function withdraw(inbox, text) {
  if (!state.id) return false;
  showError("");
  try {
    await sendJSON("DELETE", `/api/conversations/${encodeURIComponent(state.id)}/queue/${encodeURIComponent(inbox)}`);
  } catch (err) {
    showError(err.status === 404 ? "That message no longer waits: its answer has begun." : `Could not remove it: ${err.message}`);
    return false;
  }
  toast(`Withdrew “${short(text, 40)}”: it will not be answered.`);
  return true;
}

async function stop() {
  if (!state.id || !view.busy) return;
  try {
    await postJSON(`/api/conversations/${encodeURIComponent(state.id)}/stop`, {}, { attempts: 2 });
  } catch (err) {
    showError(`Could not stop: ${err.message}`);
  }
}

// -- layout, keyboard, copying ----------------------------------------------------------------

function closeSidebar() {
  $("app").classList.remove("sidebar-open");
  $("toggle-sidebar").setAttribute("aria-expanded", "false");
  $("scrim").hidden = true;
}

function openSidebar() {
  $("app").classList.add("sidebar-open");
  $("toggle-sidebar").setAttribute("aria-expanded", "true");
  $("scrim").hidden = false;
}

function onCopy(e) {
  const target = e.target.closest("button.copy");
  if (!target) return;
  const text = target.dataset.copy === "code"
    ? target.closest(".code-block").querySelector("code").textContent
    : target.closest(".message").vigilTurn?.allText ?? target.closest(".message").querySelector(".bubble").innerText;
  copyText(text).then((done) => {
    target.textContent = done ? "Copied" : "Copy failed";
    setTimeout(() => { target.textContent = "Copy"; }, 1500);
  });
}

function onKey(e) {
  if ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === "k") {
    e.preventDefault();
    if (NARROW.matches) openSidebar();
    $("search").focus();
    $("search").select();
  } else if (e.key === "Escape") {
    if ($("app").classList.contains("sidebar-open")) { closeSidebar(); return; }
    if (view.busy) { e.preventDefault(); stop(); }
  }
}

function wire() {
  view = new ConversationView($("messages"), {
    onStatus: showStatus,
    onChanged: refreshListSoon,
    reload: () => loadView(state.id).catch(() => {}),
    decide,
    send: (text) => send(text),
    withdraw,
  });
  composer = new Composer($("composer"), { onSend: send, onStop: stop });
  badge = new HeartbeatBadge($("heartbeat"), (command) => send(command), editHeartbeat);
  actions = new ConversationActions({
    patch: (id, body) => sendJSON("PATCH", `/api/conversations/${encodeURIComponent(id)}`, body),
    remove: (id) => sendJSON("DELETE", `/api/conversations/${encodeURIComponent(id)}`),
  }, { changed: onChanged, deleted: onDeleted, failed: showError });
  $("conversation-menu").addEventListener("click", headerMenu);
  $("show-archived").addEventListener("click", toggleArchived);
  wireTheme($("theme-toggle"));
  $("messages").addEventListener("click", onCopy);
  document.addEventListener("keydown", onKey);
  const startNew = async () => {
    try {
      const created = await postJSON("/api/conversations", {});
      closeSidebar();
      await select(created.id);
    } catch (err) { showError(`Could not start a conversation: ${err.message}`); }
  };
  $("new-conversation").addEventListener("click", startNew);
  $("new-chat").addEventListener("click", startNew);
  $("search").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(loadList, 250); });
  $("toggle-sidebar").addEventListener("click", () => ($("app").classList.contains("sidebar-open") ? closeSidebar() : openSidebar()));
  $("scrim").addEventListener("click", closeSidebar);
  window.addEventListener("hashchange", () => {
    const wanted = decodeURIComponent(location.hash.slice(1));
    if (wanted && wanted !== state.id) select(wanted);
  });
  setInterval(() => badge.tick(), 1000);
  // Other conversations change too (their heartbeats, other devices): refresh the list now and then.
  setInterval(() => { if (!document.hidden) loadList(); }, 30000);
}

export async function boot() {
  wire();
  welcome();
  await loadList();
  if (state.id) return;  // the person started or chose one meanwhile: that one stays
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (wanted) { await select(wanted); return; }
  const first = state.listed[0];
  if (first) await select(first.id);
}
