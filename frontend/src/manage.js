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

const QUIET = /^([0-9]{1,2}):([0-9]{2})\s*[-–—]\s*([0-9]{1,2}):([0-9]{2})$/;
const UNTIL = /^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:?[0-9]{2})?)?$/;

// The /heartbeat command for an interval ("15m", "1h30m"), an instruction and its options:
// `quiet` a daily window ("22:00-07:00"), `ends` a duration ("3d": --for) or a date
// ("2026-12-24", "2026-12-24 18:00": --until), `loud` every answer delivered. Or the rule broken.
export function heartbeatCommand(interval, prompt, { quiet = "", ends = "", loud = false } = {}) {
  const every = String(interval ?? "").trim();
  const text = String(prompt ?? "").trim();
  const window = String(quiet ?? "").trim();
  const end = String(ends ?? "").trim();
  if (!INTERVAL.test(every)) return { command: "", error: "Write the interval as a number and a unit: 90s, 15m, 2h, 1d or 1h30m." };
  if (!text) return { command: "", error: "Write what vigil should do each time." };
  if (text.length > MAX_PROMPT) return { command: "", error: `The instruction is longer than ${MAX_PROMPT} characters.` };
  const options = [];
  if (window) {
    const m = QUIET.exec(window);
    if (!m || +m[1] > 23 || +m[3] > 23 || +m[2] > 59 || +m[4] > 59) {
      return { command: "", error: "Write the quiet hours as two times of day, such as 22:00-07:00." };
    }
    options.push(`--quiet ${m[1]}:${m[2]}-${m[3]}:${m[4]}`);
  }
  if (end) {
    if (INTERVAL.test(end)) options.push(`--for ${end.toLowerCase()}`);
    else if (UNTIL.test(end)) options.push(`--until ${end}`);
    else return { command: "", error: "Write the end as a duration (3d) or a date (2026-12-24 or 2026-12-24 18:00)." };
  }
  if (loud) options.push("--loud");
  const rest = text.startsWith("-") ? `-- ${text}` : text;  // a prompt that begins with a dash is not an option
  return { command: ["/heartbeat every", every.toLowerCase(), ...options, rest].join(" "), error: "" };
}

// `epoch` as a date and time --until reads the same everywhere ("2026-12-24 18:00+01:00").
export function untilText(epoch) {
  const d = new Date(epoch * 1000);
  const two = (n) => String(n).padStart(2, "0");
  const offset = -d.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`
    + `${sign}${two(Math.floor(Math.abs(offset) / 60))}:${two(Math.abs(offset) % 60)}`;
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
// Changing one keeps its quiet hours, end and loudness unless they are changed here.
export async function askHeartbeat(current = null) {
  const values = (v) => [v.interval, v.prompt, { quiet: v.quiet, ends: v.ends, loud: v.answers === "all" }];
  const answer = await ask({
    title: current ? "Change the heartbeat" : "Set a heartbeat",
    text: "vigil acts on its own at this interval, when the conversation is idle.",
    fields: [
      { name: "interval", label: "Every", value: current?.interval_text || "1h", placeholder: "15m, 1h, 1h30m, 1d", maxLength: 20 },
      { name: "prompt", label: "Instruction", value: current?.prompt || "", multiline: true,
        placeholder: "Check the CI run and tell me when it finishes", maxLength: MAX_PROMPT },
      { name: "quiet", label: "Quiet hours (optional)", value: current?.quiet || "", placeholder: "22:00-07:00", maxLength: 20 },
      { name: "ends", label: "Ends (optional)", value: current?.ends_at ? untilText(current.ends_at) : "",
        placeholder: "after 3d, or a date: 2026-12-24", maxLength: 40 },
      { name: "answers", label: "Answers", value: current?.loud ? "all" : "news",
        options: [["news", "Only when there is news"], ["all", "Every answer"]] },
    ],
    confirm: current ? "Change" : "Set heartbeat",
    check: (v) => heartbeatCommand(...values({ ...v, ends: v.ends.replace(/^after\s+/i, "") })).error,
  });
  if (!answer) return null;
  return heartbeatCommand(...values({ ...answer, ends: answer.ends.replace(/^after\s+/i, "") })).command;
}
