// The web chat page: the conversation list, one conversation's history and live events,
// the composer, uploads, approvals and the heartbeat panel.

import { getJSON, postJSON, upload, LiveStream, HttpError } from "./api.js";
import {
  el, formatTime, formatCountdown, userBubble, heartbeatMarker, notice,
  AssistantTurn, approvalCard, resolveApproval,
} from "./render.js";

const $ = (id) => document.getElementById(id);
const state = {
  id: null,           // the conversation shown
  stream: null,       // its LiveStream
  turn: null,         // the AssistantTurn being streamed
  heartbeat: null,    // the conversation's heartbeat, or null
  pending: new Map(), // client_id -> user bubble not yet accepted
  waiting: [],        // user rows drawn live whose turn has not begun, in the order drawn
  opening: Promise.resolve(), // settles once the shown conversation's stream and history are in
  lastReply: "",      // the text of the last answer or command reply shown
  busy: false,
  queued: 0,
};

function newClientId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function scrollToEnd() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

function append(node) {
  $("empty")?.remove();
  $("messages").appendChild(node);
  scrollToEnd();
  return node;
}

// What runs now (a turn, its tools, a command's reply) goes above the messages still waiting
// in the queue, so the page reads as the history will: each message followed by its answer.
function placeBeforeWaiting(node) {
  state.waiting = state.waiting.filter((row) => row.isConnected);
  const first = state.waiting[0];
  if (!first) return append(node);
  $("messages").insertBefore(node, first);
  scrollToEnd();
  return node;
}

// The first waiting row of a message whose turn (or command) begins now, taken off the list.
function takeWaiting(match) {
  const at = state.waiting.findIndex((row) => row.isConnected && match(row.querySelector(".bubble").textContent));
  return at < 0 ? null : state.waiting.splice(at, 1)[0];
}

function showError(text) { $("composer-error").textContent = text || ""; }

// -- the conversation list --------------------------------------------------------------------

let searchTimer = 0;

async function loadList() {
  const q = $("search").value.trim();
  let data;
  try {
    data = await getJSON(`/api/conversations?limit=200${q ? `&q=${encodeURIComponent(q)}` : ""}`);
  } catch (err) { return; }
  const list = $("conversation-list");
  list.replaceChildren();
  for (const c of data.conversations) {
    const item = el("li");
    const button = el("button", "conversation");
    button.type = "button";
    if (c.id === state.id) {
      button.classList.add("selected");
      button.setAttribute("aria-current", "true");
      $("title").textContent = c.title || "(untitled)";  // a title is given after the first answer
    }
    button.appendChild(el("span", "conv-title", c.title || "(untitled)"));
    const meta = el("span", "conv-meta muted",
      `${c.source || ""} · ${c.message_count ?? 0} msgs · ${formatTime(c.updated_at)}`);
    button.appendChild(meta);
    if (c.heartbeat) button.appendChild(el("span", "conv-badge", "♥"));
    if (c.busy) button.appendChild(el("span", "conv-badge busy", "…"));
    button.addEventListener("click", () => { closeSidebar(); select(c.id); });
    item.appendChild(button);
    list.appendChild(item);
  }
  if (!data.conversations.length) list.appendChild(el("li", "muted empty-list", q ? "Nothing matches." : "No conversations yet."));
}

let listTimer = 0;
function refreshListSoon() {
  clearTimeout(listTimer);
  listTimer = setTimeout(loadList, 400);
}

// -- one conversation -------------------------------------------------------------------------

function renderHistory(view) {
  const box = $("messages");
  // Bubbles sent but not yet accepted are kept: the view may predate them. If it already has
  // one, its message_accepted event removes the copy.
  const pending = [...state.pending.values()];
  box.replaceChildren();
  state.turn = null;
  state.waiting = [...pending];
  let turn = null;
  for (const m of view.messages) {
    if (m.role === "user") {
      turn = null;
      box.appendChild(m.heartbeat ? heartbeatMarker(m.header, m.content) : userBubble(m.content, { inbox: m.inbox_id }));
    } else if (m.role === "assistant") {
      if (!turn) { turn = new AssistantTurn(); box.appendChild(turn.row); }
      if (m.content) { turn.setText(m.content); state.lastReply = m.content; }
      for (const call of m.tool_calls || []) turn.addTool(call.name, call.arguments);
    } else if (m.role === "tool") {
      if (!turn) { turn = new AssistantTurn(); box.appendChild(turn.row); }
      turn.finishTool(m.tool_name, m.content, false);
    } else if (m.content) {
      box.appendChild(notice(m.content));
    }
  }
  for (const bubble of pending) box.appendChild(bubble);
  if (!view.messages.length && !pending.length) {
    const empty = el("p", "empty muted", "No messages yet. Say something, or type /help.");
    empty.id = "empty";
    box.appendChild(empty);
  }
  scrollToEnd();
}

// Busy follows the turns themselves (turn_began / turn_ended); `status` events give the queue.
function showStatus(busy, queued) {
  state.busy = Boolean(busy);
  state.queued = queued || 0;
  const parts = [];
  if (busy) parts.push("thinking…");
  if (queued) parts.push(`${queued} queued`);
  $("status").textContent = parts.join(" · ");
}

function showHeartbeat(hb) {
  state.heartbeat = hb || null;
  const panel = $("heartbeat");
  if (!hb) { panel.hidden = true; return; }
  panel.hidden = false;
  const paused = hb.status && hb.status !== "active";
  panel.classList.toggle("paused", Boolean(paused));
  const fires = hb.fire_count ? ` · fired ${hb.fire_count}×` : "";
  const owner = hb.owner ? ` · ${hb.owner}` : "";
  $("hb-summary").textContent =
    `Heartbeat ${hb.status || ""} · every ${hb.interval_text || `${hb.interval}s`} · “${hb.prompt || ""}”${fires}${owner}`;
  tickHeartbeat();
}

function tickHeartbeat() {
  const hb = state.heartbeat;
  const out = $("hb-countdown");
  if (!hb) { out.textContent = ""; return; }
  if (hb.status && hb.status !== "active") { out.textContent = hb.status; return; }
  out.textContent = hb.next_due ? `next ${formatCountdown(hb.next_due - Date.now() / 1000)}` : "";
}

async function loadView(id) {
  const view = await getJSON(`/api/conversations/${encodeURIComponent(id)}`);
  if (state.id !== id) return view;  // another conversation was chosen meanwhile
  if (view.id !== state.id) {
    state.id = view.id;
    history.replaceState(null, "", `#${view.id}`);
  }
  $("title").textContent = view.title || "(untitled)";
  $("subtitle").textContent = `${view.source || ""} · ${view.id}`;
  renderHistory(view);
  showHeartbeat(view.heartbeat);
  showStatus(view.busy, view.queued);
  return view;
}

async function select(id) {
  if (state.stream) state.stream.close();
  state.id = id;
  state.pending.clear();
  history.replaceState(null, "", `#${id}`);
  showError("");
  // Subscribe before loading the history, so nothing happening between the two is missed;
  // a message typed meanwhile waits for both (state.opening).
  const stream = new LiveStream(id, {
    onEvent: handle,
    onState: (text) => { $("connection").textContent = text === "live" ? "" : text; },
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
  $("input").focus();
}

function currentTurn() {
  if (!state.turn) {
    state.turn = new AssistantTurn();
    state.turn.row.classList.add("streaming");
    placeBeforeWaiting(state.turn.row);
  }
  return state.turn;
}

// Whether the history just drawn ends with this message already (its turn began before the
// history was read, and the page hears of that turn only now).
function endsWithUser(text) {
  const rows = [...$("messages").children].filter((row) => !state.waiting.includes(row));
  const last = rows[rows.length - 1];
  return Boolean(last && last.classList.contains("user") && last.textContent === text);
}

async function decide(id, approve, card) {
  try {
    await postJSON(`/api/approvals/${encodeURIComponent(id)}`, { approve }, { attempts: 2 });
    resolveApproval(card, approve);
  } catch (err) {
    resolveApproval(card, false, err.status === 404 ? "no longer pending" : `could not answer: ${err.message}`);
  }
}

function fileLink(event) {
  const row = el("div", "message notice file");
  row.setAttribute("role", "article");
  const link = el("a", "file-link", `⬇ ${event.name || "file"}`);
  link.href = event.url;
  link.setAttribute("download", event.name || "");
  row.appendChild(link);
  if (event.size) row.appendChild(el("span", "muted", ` (${event.size} bytes)`));
  if (event.text) row.appendChild(el("p", "notice-text", event.text));
  return row;
}

function cronNotice(event) {
  const row = el("div", "message notice cron");
  row.setAttribute("role", "article");
  const link = el("a", "cron-link", `Cron job ${event.job || ""} answered`);
  link.href = `#${event.session_id}`;
  row.appendChild(link);
  row.appendChild(el("p", "notice-text", (event.text || "").slice(0, 280)));
  return row;
}

function handle(event) {
  if (event.type === "reply" && event.kind === "cron" && event.session_id !== state.id) {
    append(cronNotice(event));  // every open page hears of a cron answer; the link opens its run
    refreshListSoon();
    return;
  }
  if (event.session_id && state.id && event.session_id !== state.id && event.type !== "session_moved") return;
  switch (event.type) {
    case "message_accepted": {
      // A history reload may have drawn this message already (and dropped the pending bubble).
      const drawn = event.inbox_id != null
        && $("messages").querySelector(`.message.user[data-inbox="${CSS.escape(String(event.inbox_id))}"]`);
      const bubble = state.pending.get(event.client_id);
      state.pending.delete(event.client_id);
      if (drawn) {
        if (bubble && bubble !== drawn) bubble.remove();
      } else if (bubble) {
        bubble.classList.remove("pending");
        if (event.inbox_id != null) bubble.dataset.inbox = String(event.inbox_id);
      } else {
        state.waiting.push(append(userBubble(event.text, { inbox: event.inbox_id })));
      }
      break;
    }
    case "turn_began":
      showStatus(true, Math.max(0, state.queued - (event.kind === "user" ? 1 : 0)));
      state.turn = null;
      if (event.kind === "heartbeat") placeBeforeWaiting(heartbeatMarker(event.header, event.text));
      else if (event.text) {
        const row = takeWaiting((text) => text === event.text)
          || (endsWithUser(event.text) ? null : userBubble(event.text));
        if (row) placeBeforeWaiting(row);
      }
      currentTurn();
      break;
    case "delta":
      currentTurn().appendText(event.text || "");
      scrollToEnd();
      break;
    case "tool_started":
      currentTurn().addTool(event.name, event.arguments);
      scrollToEnd();
      break;
    case "tool_finished":
      currentTurn().finishTool(event.name, event.content, event.is_error);
      break;
    case "turn_ended":
      if (state.turn) {
        state.turn.end(event);
        state.lastReply = state.turn.allText || event.content || "";
      } else if (event.content || event.error) {
        const turn = currentTurn();
        turn.end(event);
        state.lastReply = event.content || "";
      }
      state.turn = null;
      showStatus(false, state.queued);
      refreshListSoon();
      break;
    case "command_reply": {
      const command = takeWaiting((text) => text.trimStart().startsWith("/"));
      if (command) placeBeforeWaiting(command);
      placeBeforeWaiting(notice(event.text, { error: event.is_error, pre: true }));
      state.lastReply = event.text;
      refreshListSoon();
      break;
    }
    case "approval_request":
      placeBeforeWaiting(approvalCard(event, decide));
      break;
    case "approval_resolved": {
      const card = $("messages").querySelector(`[data-approval="${CSS.escape(event.id)}"]`);
      if (card) resolveApproval(card, event.approved);
      break;
    }
    case "heartbeat":
      showHeartbeat(event.heartbeat);
      refreshListSoon();
      break;
    case "session_moved":
      if (!event.new_session_id) {
        append(notice("This conversation has ended. Start a new one, or send a message to reopen it."));
        refreshListSoon();
        break;
      }
      append(notice(event.reason === "compression"
        ? "The conversation was compressed; it continues in a new session."
        : "Switched to another conversation."));
      select(event.new_session_id);
      break;
    case "status":
      showStatus(state.busy, event.queued);
      break;
    case "stale":  // another gateway worker had more to say than it could pass on live
      loadView(state.id).catch(() => {});
      break;
    case "reply":
      if (event.kind === "file" && event.url) { placeBeforeWaiting(fileLink(event)); break; }
      // The outbox's copy of an answer: already shown when it streamed; if this page missed
      // it (opened mid-turn, reconnected), the history has it.
      if (!state.turn && event.text && event.text.trim() !== (state.lastReply || "").trim()) {
        loadView(state.id).catch(() => {});
      }
      break;
    default:
      break;
  }
}

// -- composing --------------------------------------------------------------------------------

async function ensureConversation() {
  if (state.id) return state.id;
  const created = await postJSON("/api/conversations", {});
  await select(created.id);
  return created.id;
}

async function send() {
  const input = $("input");
  const text = input.value;
  if (!text.trim()) return;
  showError("");
  input.value = "";
  autosize();
  const clientId = newClientId();
  let id;
  try {
    id = await ensureConversation();
  } catch (err) {
    input.value = text;
    showError(`Could not start a conversation: ${err.message}`);
    return;
  }
  await state.opening;
  const bubble = append(userBubble(text, { pending: true }));
  state.pending.set(clientId, bubble);
  state.waiting.push(bubble);
  try {
    await postJSON(`/api/conversations/${encodeURIComponent(id)}/messages`, { text, client_id: clientId });
  } catch (err) {
    bubble.classList.add("failed");
    bubble.appendChild(el("span", "failed-note", `not sent: ${err.message}`));
    state.pending.delete(clientId);
    state.waiting = state.waiting.filter((row) => row !== bubble);
  }
}

function autosize() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

async function uploadFile(file) {
  showError("");
  try {
    const id = await ensureConversation();
    const saved = await upload(`/api/conversations/${encodeURIComponent(id)}/files`, file);
    const input = $("input");
    input.value = `${input.value}${input.value && !input.value.endsWith("\n") ? "\n" : ""}I uploaded ${saved.path}`;
    autosize();
    input.focus();
  } catch (err) {
    showError(`Upload failed: ${err.message}`);
  }
}

// -- the narrow layout's sidebar ------------------------------------------------------------

function closeSidebar() {
  $("app").classList.remove("sidebar-open");
  $("toggle-sidebar").setAttribute("aria-expanded", "false");
}

function wire() {
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  $("input").addEventListener("input", autosize);
  $("new-conversation").addEventListener("click", async () => {
    try {
      const created = await postJSON("/api/conversations", {});
      closeSidebar();
      await select(created.id);
    } catch (err) { showError(`Could not start a conversation: ${err.message}`); }
  });
  $("search").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(loadList, 250); });
  $("upload-button").addEventListener("click", () => $("upload-input").click());
  $("upload-input").addEventListener("change", (e) => {
    const file = e.target.files && e.target.files[0];
    if (file) uploadFile(file);
    e.target.value = "";
  });
  $("toggle-sidebar").addEventListener("click", () => {
    const open = $("app").classList.toggle("sidebar-open");
    $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  });
  window.addEventListener("hashchange", () => {
    const wanted = decodeURIComponent(location.hash.slice(1));
    if (wanted && wanted !== state.id) select(wanted);
  });
  setInterval(tickHeartbeat, 1000);
  // Other conversations change too (their heartbeats, other devices): refresh the list now and then.
  setInterval(() => { if (!document.hidden) loadList(); }, 30000);
}

async function boot() {
  wire();
  await loadList();
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (wanted) { await select(wanted); return; }
  const first = $("conversation-list").querySelector("button.conversation");
  if (first) first.click();
}

boot();
