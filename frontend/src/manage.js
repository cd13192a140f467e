// Renaming, archiving and deleting conversations, and setting a heartbeat from controls: the
// rules (checked here as the gateway checks them, so a mistake is shown before anything is
// sent) and the actions, which ask the person (a dialog), call the API and say what happened
// (a toast, with Undo for Archive). Deleting asks first and cannot be undone.
import { ask } from "./dialog.js";
import { toast } from "./toast.js";

export const MAX_TITLE = 200;
export const MAX_PROMPT = 8000;
const CONTROL = /[\p{Cc}\u202a-\u202e\u2066-\u2069]/u;
const INTERVAL = /^(?=\d)(\d+d)?(\d+h)?(\d+m)?(\d+s)?$/i;

// The title as the gateway stores it (one line, spaces collapsed), or the rule it breaks.
export function cleanTitle(text) {
  const title = String(text ?? "").split(/\s+/u).filter(Boolean).join(" ");
  if (!title) return { title, error: "The title must not be empty." };
  if ([...title].length > MAX_TITLE) return { title, error: `The title is longer than ${MAX_TITLE} characters.` };
  if (CONTROL.test(title)) return { title, error: "The title holds a control character: use printable text." };
  return { title, error: "" };
}

// The /heartbeat command for an interval ("15m", "1h30m") and an instruction, or the rule broken.
export function heartbeatCommand(interval, prompt) {
  const every = String(interval ?? "").trim();
  const text = String(prompt ?? "").trim();
  if (!INTERVAL.test(every)) return { command: "", error: "Write the interval as a number and a unit: 90s, 15m, 2h, 1d or 1h30m." };
  if (!text) return { command: "", error: "Write what vigil should do each time." };
  if (text.length > MAX_PROMPT) return { command: "", error: `The instruction is longer than ${MAX_PROMPT} characters.` };
  return { command: `/heartbeat every ${every.toLowerCase()} ${text}`, error: "" };
}

const quoted = (c) => `“${c.title || "(untitled)"}”`;

// `api`: {patch(id, body), remove(id)} returning promises (the gateway's JSON);
// `on`: {changed(summary), deleted(result), failed(text)}.
export class ConversationActions {
  constructor(api, on) {
    this.api = api;
    this.on = on;
  }

  async rename(c) {
    const answer = await ask({
      title: "Rename conversation",
      fields: [{ name: "title", label: "Title", value: c.title || "", maxLength: MAX_TITLE }],
      confirm: "Rename",
      check: ({ title }) => cleanTitle(title).error,
    });
    if (!answer) return null;
    return this.change(c, { title: cleanTitle(answer.title).title }, "Could not rename");
  }

  async archive(c, archived = true) {
    const summary = await this.change(c, { archived }, archived ? "Could not archive" : "Could not bring it back");
    if (!summary) return null;
    if (archived) {
      toast(`Archived ${quoted(summary)}.`, { action: "Undo", onAction: () => this.archive(summary, false) });
    } else {
      toast(`${quoted(summary)} is back in the list.`);
    }
    return summary;
  }

  async remove(c) {
    const count = c.message_count ?? 0;
    const sure = await ask({
      title: "Delete conversation?",
      text: `${quoted(c)} and its ${count} message${count === 1 ? "" : "s"} will be deleted for good`
        + `${c.heartbeat ? ", and its heartbeat cleared" : ""}. This cannot be undone.`,
      confirm: "Delete",
      danger: true,
    });
    if (!sure) return null;
    try {
      const gone = await this.api.remove(c.id);
      toast(`Deleted ${quoted(c)}.`);
      this.on.deleted(gone);
      return gone;
    } catch (err) {
      this.on.failed(`Could not delete: ${err.message}`);
      return null;
    }
  }

  async change(c, body, failure) {
    try {
      const summary = await this.api.patch(c.id, body);
      this.on.changed(summary);
      return summary;
    } catch (err) {
      this.on.failed(`${failure}: ${err.message}`);
      return null;
    }
  }
}

// The dialog that sets (or changes) a heartbeat; resolves to the /heartbeat command or null.
export async function askHeartbeat(current = null) {
  const answer = await ask({
    title: current ? "Change the heartbeat" : "Set a heartbeat",
    text: "vigil acts on its own at this interval, when the conversation is idle.",
    fields: [
      { name: "interval", label: "Every", value: current?.interval_text || "1h", placeholder: "15m, 1h, 1h30m, 1d", maxLength: 20 },
      { name: "prompt", label: "Instruction", value: current?.prompt || "", multiline: true,
        placeholder: "Check the CI run and tell me when it finishes", maxLength: MAX_PROMPT },
    ],
    confirm: current ? "Change" : "Set heartbeat",
    check: ({ interval, prompt }) => heartbeatCommand(interval, prompt).error,
  });
  return answer ? heartbeatCommand(answer.interval, answer.prompt).command : null;
}
