// What the ConversationView tests share: a view drawing into a page of its own, and its live events.
import { ConversationView } from "../src/conversation.js";

export const SID = "s1";

// A ConversationView (with the options the page gives it) drawing into a new <section> that is
// all the page holds; `event(type, fields)` hands it a live event of conversation SID.
export function newView(options) {
  const box = document.createElement("section");
  document.body.replaceChildren(box);
  const view = new ConversationView(box, options);
  const event = (type, fields = {}) => view.handle({ type, session_id: SID, ...fields });
  return { box, view, event };
}

// Resolves after the next animation frame, once streamed text is drawn.
export const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
