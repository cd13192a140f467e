import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LiveStream } from "../src/api.js";

// An EventSource the test drives: each instance is one connection attempt.
class FakeSource {
  static made = [];
  constructor(url) {
    this.url = url;
    this.closed = false;
    FakeSource.made.push(this);
  }
  close() { this.closed = true; }
  open() { this.onopen?.(); }
  send(event) { this.onmessage?.({ data: JSON.stringify(event) }); }
  fail() { this.onerror?.(); }
}

describe("LiveStream", () => {
  beforeEach(() => { FakeSource.made = []; vi.useFakeTimers(); });
  afterEach(() => vi.useRealTimers());

  function stream() {
    const seen = { events: [], states: [], reconnects: 0 };
    const live = new LiveStream("abc", {
      onEvent: (e) => seen.events.push(e),
      onState: (s) => seen.states.push(s),
      onReconnect: () => { seen.reconnects += 1; },
      EventSourceClass: FakeSource,
      checkLogin: false,
    });
    return { live, seen };
  }

  it("subscribes to the conversation's events and passes them on", async () => {
    const { live, seen } = stream();
    expect(FakeSource.made[0].url).toBe("/api/conversations/abc/events");
    FakeSource.made[0].open();
    await live.ready;
    FakeSource.made[0].send({ type: "delta", text: "hi" });
    FakeSource.made[0].onmessage({ data: "not json" });
    expect(seen.events).toEqual([{ type: "delta", text: "hi" }]);
    expect(seen.states).toEqual(["live"]);
    expect(seen.reconnects).toBe(0);
  });

  it("reconnects by itself with growing pauses and reloads the history once back", () => {
    const { seen } = stream();
    FakeSource.made[0].open();
    FakeSource.made[0].fail();
    expect(seen.states.at(-1)).toBe("reconnecting in 1s");
    vi.advanceTimersByTime(1000);
    expect(FakeSource.made.length).toBe(2);
    FakeSource.made[1].fail();
    expect(seen.states.at(-1)).toBe("reconnecting in 2s");
    vi.advanceTimersByTime(1999);
    expect(FakeSource.made.length).toBe(2);
    vi.advanceTimersByTime(1);
    FakeSource.made[2].open();
    expect(seen.states.at(-1)).toBe("live");
    expect(seen.reconnects).toBe(1);
    FakeSource.made[2].fail();
    expect(seen.states.at(-1)).toBe("reconnecting in 1s");  // the pause starts small again
  });

  it("stops for good when closed", () => {
    const { live } = stream();
    FakeSource.made[0].fail();
    live.close();
    vi.advanceTimersByTime(60_000);
    expect(FakeSource.made.length).toBe(1);
  });
});
