// One conversation as shown: its history, then its live events drawn into the same list so it
// reads as the history will once reloaded (each message followed by its answer, messages sent
// during a turn waiting below it). DOM only; talking to the gateway is the caller's part.
import { el } from "./dom.js";
import { AssistantTurn, setToolState } from "./turn.js";
import { approvalCard, resolveApproval } from "./approval.js";
import { userBubble, heartbeatMarker, heartbeatFold, notice, commandReply, fileLink, replyNotice } from "./rows.js";
import { markWaiting, unmarkWaiting } from "./queue.js";
import { noteKind, noteRow } from "./notes.js";

const REFUSED = /^(the user declined:|refused:)/;
export const HISTORY_CHUNK = 150;

// Where a turn begins at or before `index` (a message of the person's), so none is cut in two.
function turnStart(messages, index) {
  let at = Math.max(0, index);
  while (at > 0 && messages[at].role !== "user") at--;
  return at;
}

export class ConversationView {
  // `box`: the #messages element. Callbacks: onStatus(busy, queued), onHeartbeat(hb),
  // onChanged() (the list may have changed), reload() (draw the history again),
  // decide(id, approve, card) (answer an approval), send(text) (a command from a button),
  // withdraw(inboxId, text) (a waiting message's Remove button; resolves to whether it was).
  constructor(box, callbacks = {}) {
    this.box = box;
    this.on = {
      onStatus() {}, onHeartbeat() {}, onChanged() {}, reload() {}, decide() {}, send() {},
      withdraw: async () => false, ...callbacks,
    };
    this.reset();
  }

  reset() {
    this.turn = null;          // the AssistantTurn being streamed
    this.pending = new Map();  // client_id -> user bubble not yet accepted
    this.waiting = [];         // user rows drawn live whose turn has not begun, in order drawn
    this.beat = null;          // the heartbeat turn running: {marker, when} (folded if nothing changed)
    this.notes = new Set();    // the notes shown live (their copy from the outbox is not shown again)
    this.lastReply = "";       // the last answer or command reply shown
    this.lastError = "";       // the error the last turn ended with (its notice is not shown again)
    this.busy = false;
    this.queued = 0;
  }

  clear(emptyText) {
    for (const timer of this.box.querySelectorAll(".approval")) clearInterval(timer.timer);
    this.box.replaceChildren();
    this.reset();
    if (emptyText) this.showEmpty(emptyText);
  }

  showEmpty(text) {
    const empty = el("div", "empty");
    empty.id = "empty";
    empty.appendChild(el("p", "empty-title", text));
    this.box.appendChild(empty);
    return empty;
  }

  scrollToEnd() {
    this.box.scrollTop = this.box.scrollHeight;
  }

  append(node) {
    this.box.querySelector("#empty")?.remove();
    this.box.appendChild(node);
    this.scrollToEnd();
    return node;
  }

  // What runs now goes above the messages still waiting in the queue.
  placeBeforeWaiting(node) {
    this.waiting = this.waiting.filter((row) => row.isConnected);
    const first = this.waiting[0];
    if (!first) return this.append(node);
    this.box.insertBefore(node, first);
    this.scrollToEnd();
    return node;
  }

  takeWaiting(match) {
    const at = this.waiting.findIndex((row) => row.isConnected && match(row.querySelector(".bubble").textContent));
    return at < 0 ? null : unmarkWaiting(this.waiting.splice(at, 1)[0]);
  }

  // The inputs waiting behind the running one, as the gateway lists them ({position, text,
  // inbox_id}, in the order they will be handled): each gets its row below the turn (drawn
  // now if this page has none, as after a reload), numbered, with a Remove button. A row no
  // longer listed is an ordinary message again (its turn begins; a withdrawn one is removed).
  showWaiting(items = []) {
    this.waiting = this.waiting.filter((row) => row.isConnected);
    const listed = new Set();
    for (const item of items) {
      const inbox = item.inbox_id == null ? null : String(item.inbox_id);
      let row = this.waiting.find((r) => !listed.has(r) && (inbox !== null
        ? r.dataset.inbox === inbox
        : !r.dataset.inbox && r.querySelector(".bubble").textContent === item.text));
      if (!row) {  // before the messages not yet accepted, which come after it
        row = userBubble(item.text, { inbox });
        const sending = this.waiting.findIndex((r) => r.classList.contains("pending"));
        if (sending < 0) this.waiting.push(this.append(row));
        else {
          this.box.insertBefore(row, this.waiting[sending]);
          this.waiting.splice(sending, 0, row);
        }
      }
      listed.add(row);
      markWaiting(row, item.position, inbox === null ? null : (remove) => this.remove(row, remove));
    }
    for (const row of this.waiting) if (!listed.has(row) && row.classList.contains("queued")) unmarkWaiting(row);
  }

  // The Remove button of a waiting message: withdrawn (the gateway records it so) and gone.
  async remove(row, remove) {
    remove.disabled = true;
    const done = await this.on.withdraw(row.dataset.inbox, row.querySelector(".bubble").textContent);
    if (done) this.dropWaiting(row.dataset.inbox);
    else remove.disabled = false;
  }

  dropWaiting(inbox) {
    const row = [...this.box.querySelectorAll(".message.user")].find((r) => r.dataset.inbox === String(inbox));
    if (!row) return;
    row.remove();
    this.waiting = this.waiting.filter((r) => r !== row);
  }

  // A heartbeat turn that answered HEARTBEAT_OK: its marker and its turn go into one quiet line.
  foldHeartbeat(turnRow) {
    const { marker, when } = this.beat || {};
    this.beat = null;
    if (!marker || !marker.isConnected) return;
    const fold = heartbeatFold([], when);
    marker.before(fold);
    fold.querySelector(".fold-body").append(marker, ...(turnRow && turnRow.isConnected ? [turnRow] : []));
  }

  // Whether the history just drawn ends with this message already (its turn began before the
  // history was read, and the page hears of that turn only now).
  endsWithUser(text) {
    const rows = [...this.box.children].filter((row) => !this.waiting.includes(row));
    const last = rows[rows.length - 1];
    return Boolean(last && last.classList.contains("user") && last.textContent === text);
  }

  currentTurn() {
    if (!this.turn) {
      this.turn = new AssistantTurn();
      this.turn.row.classList.add("streaming");
      this.placeBeforeWaiting(this.turn.row);
    }
    return this.turn;
  }

  setStatus(busy, queued) {
    this.busy = Boolean(busy);
    this.queued = queued || 0;
    this.on.onStatus(this.busy, this.queued);
  }

  // -- the history ---------------------------------------------------------------------------
  // A long conversation opens at its end: the last HISTORY_CHUNK messages (from a message of
  // the person's) are drawn, older ones when the top is scrolled to ("Show earlier messages").
  renderHistory(view, emptyText = "No messages yet. Say something, or type /help.") {
    // Bubbles sent but not yet accepted are kept: the view may predate them.
    const pending = [...this.pending.values()];
    this.box.replaceChildren();
    this.turn = null;
    this.beat = null;
    this.waiting = [...pending];
    this.history = view.messages || [];
    this.drawnFrom = turnStart(this.history, this.history.length - HISTORY_CHUNK);
    this.box.appendChild(this.draw(this.history.slice(this.drawnFrom)));
    this.earlierButton();
    for (const bubble of pending) this.box.appendChild(bubble);
    if (!this.history.length && !pending.length) this.showEmpty(emptyText);
    this.showWaiting(view.waiting || []);
    this.setStatus(view.busy, view.queued);
    this.scrollToEnd();
  }

  draw(messages) {
    let turn = null;
    let beat = null;  // a heartbeat turn being drawn: folded if its answer was HEARTBEAT_OK
    const turns = [];
    const rows = document.createDocumentFragment();
    const place = (row) => (beat ? beat.rows.push(row) : rows.appendChild(row));
    const endBeat = () => {
      if (beat) rows.append(...(beat.silent ? [heartbeatFold(beat.rows, beat.when)] : beat.rows));
      beat = null;
    };
    for (const m of messages) {
      if (m.role === "user") {
        endBeat();
        turn = null;
        if (m.heartbeat) beat = { rows: [], when: m.created_at, silent: false };
        place(m.heartbeat ? heartbeatMarker(m.header, m.content) : userBubble(m.content, { inbox: m.inbox_id }));
      } else if (m.role === "assistant") {
        if (!turn) { turn = new AssistantTurn(); turns.push(turn); place(turn.row); }
        if (m.content) { turn.setText(m.content); this.lastReply = m.content; }
        if (m.content && beat) beat.silent = Boolean(m.silent);
        for (const call of m.tool_calls || []) turn.addTool(call.name, call.arguments);
      } else if (m.role === "tool") {
        if (!turn) { turn = new AssistantTurn(); turns.push(turn); place(turn.row); }
        turn.finishTool(m.tool_name, m.content, REFUSED.test(m.content || ""));
      } else if (m.content) {
        endBeat();
        rows.appendChild(m.role === "note" && noteKind(m.content, m)
          ? noteRow(m.content, { status: m.background?.status }) : notice(m.content));
      }
    }
    endBeat();
    for (const drawn of turns) drawn.addActions();
    return rows;
  }

  earlierButton() {
    this.observer?.disconnect();
    this.box.querySelector(".earlier")?.remove();
    if (!this.drawnFrom) return;
    const more = el("button", "earlier small", `Show earlier messages (${this.drawnFrom})`);
    more.type = "button";
    more.addEventListener("click", () => this.showEarlier());
    this.box.prepend(more);
    if (typeof IntersectionObserver === "function") {
      this.observer = new IntersectionObserver((seen) => { if (seen.some((e) => e.isIntersecting)) this.showEarlier(); },
        { root: this.box, rootMargin: "200px 0px 0px 0px" });
      this.observer.observe(more);
    }
  }

  showEarlier() {
    if (!this.drawnFrom) return;
    const from = turnStart(this.history, this.drawnFrom - HISTORY_CHUNK);
    const rows = this.draw(this.history.slice(from, this.drawnFrom));
    const height = this.box.scrollHeight;
    const top = this.box.scrollTop;
    this.box.querySelector(".earlier").after(rows);
    this.drawnFrom = from;
    this.earlierButton();
    this.box.scrollTop = top + (this.box.scrollHeight - height);  // what was read stays put
  }

  // -- sending -------------------------------------------------------------------------------
  addPending(text, clientId) {
    const bubble = this.append(userBubble(text, { pending: true }));
    this.pending.set(clientId, bubble);
    this.waiting.push(bubble);
    return bubble;
  }

  failPending(clientId, message) {
    const bubble = this.pending.get(clientId);
    if (!bubble) return;
    bubble.classList.add("failed");
    bubble.appendChild(el("span", "failed-note", `not sent: ${message}`));
    this.pending.delete(clientId);
    this.waiting = this.waiting.filter((row) => row !== bubble);
  }

  findApproval(id) {
    return [...this.box.querySelectorAll(".approval")].find((card) => card.dataset.approval === id) || null;
  }

  // -- live events ---------------------------------------------------------------------------
  handle(event) {
    switch (event.type) {
      case "message_accepted": {
        // A history reload may have drawn this message already (and dropped the pending bubble).
        const drawn = event.inbox_id != null
          && [...this.box.querySelectorAll(".message.user")].find((r) => r.dataset.inbox === String(event.inbox_id));
        const bubble = this.pending.get(event.client_id);
        this.pending.delete(event.client_id);
        if (drawn) {
          if (bubble && bubble !== drawn) bubble.remove();
        } else if (bubble) {
          bubble.classList.remove("pending");
          if (event.inbox_id != null) bubble.dataset.inbox = String(event.inbox_id);
        } else {
          this.waiting.push(this.append(userBubble(event.text, { inbox: event.inbox_id })));
        }
        break;
      }
      case "turn_began":
        this.setStatus(true, Math.max(0, this.queued - (event.kind === "user" ? 1 : 0)));
        this.turn = null;
        this.beat = null;
        if (event.kind === "heartbeat") {
          this.beat = { marker: this.placeBeforeWaiting(heartbeatMarker(event.header, event.text)), when: Date.now() / 1000 };
        } else if (event.text) {
          const row = this.takeWaiting((text) => text === event.text)
            || (this.endsWithUser(event.text) ? null : userBubble(event.text));
          if (row) this.placeBeforeWaiting(row);
        }
        this.currentTurn();
        break;
      case "delta":
        this.currentTurn().appendText(event.text || "");
        this.scrollToEnd();
        break;
      case "tool_started":
        this.currentTurn().addTool(event.name, event.arguments);
        this.scrollToEnd();
        break;
      case "tool_finished":
        this.currentTurn().finishTool(event.name, event.content, event.is_error);
        break;
      case "turn_ended": {
        const turn = this.turn || ((event.content || event.error || event.cancelled) ? this.currentTurn() : null);
        if (turn) {
          turn.end(event);
          this.lastReply = turn.allText || event.content || "";
        }
        if (event.kind === "heartbeat" && event.silent) this.foldHeartbeat(turn?.row);
        this.beat = null;
        this.lastError = event.error || "";
        this.turn = null;
        this.setStatus(false, this.queued);
        this.on.onChanged();
        break;
      }
      case "command_reply": {
        const command = this.takeWaiting((text) => text.trimStart().startsWith("/"));
        if (command) this.placeBeforeWaiting(command);
        this.placeBeforeWaiting(commandReply(event.text, event.is_error));
        this.lastReply = event.text;
        this.on.onChanged();
        break;
      }
      case "approval_request": {
        const card = approvalCard(event, this.on.decide);
        const tool = this.turn ? this.turn.waitForApproval(card) : null;
        if (tool) card.tool = tool;
        else {
          const row = el("div", "message approval-row");
          row.appendChild(card);
          this.placeBeforeWaiting(row);
        }
        this.scrollToEnd();
        break;
      }
      case "approval_resolved": {
        const card = this.findApproval(event.id);
        if (card) this.resolved(card, event.approved);
        break;
      }
      case "status":
        this.setStatus(this.busy, event.queued);
        break;
      case "queue":
        this.showWaiting(event.waiting || []);
        this.setStatus(this.busy, (event.waiting || []).length);
        break;
      case "note":  // a /background task's answer, a heartbeat vigil ended or paused
        this.notes.add(event.text);
        this.placeBeforeWaiting(noteKind(event.text, event) ? noteRow(event.text, event) : notice(event.text));
        break;
      case "withdrawn":  // by its Remove button (here or on another page) or /queue drop, /queue clear
        this.dropWaiting(event.inbox_id);
        break;
      case "waiting":  // the model cannot be reached (or none is configured): the turn tries again
        this.currentTurn().waiting(event.text ? event : null);
        break;
      case "reply":
        if (event.kind === "file" && event.url) { this.placeBeforeWaiting(fileLink(event)); break; }
        if (event.kind === "notice") {
          if (this.notes.has(event.text)) break;  // a note's copy for the chat: shown already
          if (noteKind(event.text)) { this.placeBeforeWaiting(noteRow(event.text)); break; }
          // Why a message could not be answered (yet). A turn's own error was shown with it.
          if (event.text && event.text !== `⚠ ${this.lastError}`) {
            this.placeBeforeWaiting(replyNotice(event.text, this.on.send, { original: this.failedText(event.inbox_id) }));
          }
          break;
        }
        // The outbox's copy of an answer: already shown when it streamed; if this page missed
        // it (opened mid-turn, reconnected), the history has it.
        if (!this.turn && event.text && event.text.trim() !== (this.lastReply || "").trim()) this.on.reload();
        break;
      default:
        break;
    }
  }

  // The text of the person's message `inboxId`, when a notice says it was not answered (not
  // for a notice without a message, such as "No model is configured", nor for a command).
  failedText(inboxId) {
    if (inboxId === null || inboxId === undefined) return "";
    const row = [...this.box.querySelectorAll(".message.user")].find((r) => r.dataset.inbox === String(inboxId));
    const text = row?.querySelector(".bubble")?.textContent || "";
    return text.trimStart().startsWith("/") ? "" : text;
  }

  resolved(card, approved, text) {
    resolveApproval(card, approved, text);
    if (card.tool && !card.tool.dataset.done) setToolState(card.tool, approved ? "running" : "refused");
  }
}
