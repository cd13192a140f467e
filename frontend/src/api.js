// Talking to the gateway: JSON requests (retried with the same idempotency key on a network
// error) and the live event stream (reconnected with back-off).

export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function parse(response) {
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  if (response.status === 401) {
    window.location.assign("/login");
    throw new HttpError(401, "logged out");
  }
  if (!response.ok) throw new HttpError(response.status, (body && body.error) || `HTTP ${response.status}`);
  return body;
}

export async function getJSON(path) {
  return parse(await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } }));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// POST JSON; a network error (no answer at all) is retried with the same body, so a message
// carrying its client_id is answered once however many times it is sent.
export async function postJSON(path, body, { attempts = 6 } = {}) {
  let delay = 500;
  for (let attempt = 1; ; attempt++) {
    let response;
    try {
      response = await fetch(path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body ?? {}),
      });
    } catch (err) {
      if (attempt >= attempts) throw new HttpError(0, "the gateway cannot be reached");
      await sleep(delay);
      delay = Math.min(delay * 2, 8000);
      continue;
    }
    if (response.status === 503 && attempt < attempts) {
      await sleep(delay);
      delay = Math.min(delay * 2, 8000);
      continue;
    }
    return parse(response);
  }
}

// PATCH or DELETE (not retried: the person sees the error and can try again).
export async function sendJSON(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new HttpError(0, "the gateway cannot be reached");
  }
  return parse(response);
}

export async function upload(path, file) {
  const form = new FormData();
  form.append("file", file, file.name);
  return parse(await fetch(path, { method: "POST", credentials: "same-origin", body: form }));
}

// The live events of one conversation. `onEvent(dict)` for each event, `onState(text)` with
// "live", "reconnecting in Ns" ... (tests pass their own EventSource), `onReconnect()` after a reconnection (reload the history).
export class LiveStream {
  constructor(sessionId, { onEvent, onState, onReconnect, EventSourceClass = globalThis.EventSource, checkLogin = true }) {
    this.EventSourceClass = EventSourceClass;
    this.checkLogin = checkLogin;
    this.sessionId = sessionId;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onReconnect = onReconnect;
    this.delay = 1000;
    this.closed = false;
    this.source = null;
    this.timer = null;
    this.everOpen = false;
    // Resolves once the stream is subscribed, so nothing sent after it is missed.
    this.ready = new Promise((resolve) => { this.markReady = resolve; });
    this.open();
  }

  open() {
    if (this.closed) return;
    const source = new this.EventSourceClass(`/api/conversations/${encodeURIComponent(this.sessionId)}/events`);
    this.source = source;
    source.onopen = () => {
      this.delay = 1000;
      this.onState("live");
      if (this.everOpen) this.onReconnect();
      this.everOpen = true;
      this.markReady();
    };
    source.onmessage = (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch { return; }
      this.onEvent(event);
    };
    source.onerror = () => {
      source.close();
      if (this.closed) return;
      const seconds = Math.round(this.delay / 1000);
      this.onState(`reconnecting in ${seconds}s`);
      this.timer = setTimeout(() => this.open(), this.delay);
      this.delay = Math.min(this.delay * 2, 30000);
      // A lapsed login shows as a stream error: find out, and go to the login page if so.
      if (this.checkLogin) getJSON("/api/conversations?limit=1").catch(() => {});
    };
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.source) this.source.close();
  }
}
