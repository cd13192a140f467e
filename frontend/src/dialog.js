// Modal questions on the native <dialog>: focus stays inside, Esc cancels, the page behind is
// inert. `ask()` resolves to the value given (the fields' values, or true) or null when cancelled.
import { el, button } from "./dom.js";

let open = null;

// fields: [{name, label, value, multiline, placeholder, maxLength, options: [[value, text]]}].
// `check(values)` returns an error text to show (the dialog stays open) or "".
export function ask({ title, text = "", fields = [], confirm = "OK", danger = false, check = () => "" }) {
  open?.close();
  const dialog = el("dialog", "dialog");
  dialog.setAttribute("aria-labelledby", "dialog-title");
  const form = el("form", "dialog-form");
  form.method = "dialog";
  const heading = el("h2", "dialog-title", title);
  heading.id = "dialog-title";
  form.appendChild(heading);
  if (text) form.appendChild(el("p", "dialog-text", text));
  const inputs = {};
  for (const field of fields) {
    const id = `dialog-field-${field.name}`;
    const label = el("label", "dialog-label", field.label);
    label.htmlFor = id;
    let input;
    if (field.options) {
      input = el("select", "dialog-input");
      for (const [value, shown] of field.options) {
        const option = el("option", null, shown);
        option.value = value;
        input.appendChild(option);
      }
    } else {
      input = el(field.multiline ? "textarea" : "input", "dialog-input");
      if (!field.multiline) input.type = "text";
      if (field.multiline) input.rows = 3;
      if (field.placeholder) input.placeholder = field.placeholder;
      if (field.maxLength) input.maxLength = field.maxLength;
      input.autocomplete = "off";
    }
    input.id = id;
    input.name = field.name;
    input.value = field.value ?? "";
    inputs[field.name] = input;
    form.append(label, input);
  }
  const problem = el("p", "dialog-error");
  problem.setAttribute("role", "alert");
  form.appendChild(problem);
  const actions = el("div", "dialog-actions");
  const cancel = button("Cancel", "small");
  const ok = el("button", danger ? "danger" : "primary", confirm);
  ok.type = "submit";
  ok.value = "ok";
  actions.append(cancel, ok);
  form.appendChild(actions);
  dialog.appendChild(form);
  document.body.appendChild(dialog);
  open = dialog;
  const values = () => Object.fromEntries(Object.entries(inputs).map(([k, input]) => [k, input.value]));
  return new Promise((resolve) => {
    let result = null;
    cancel.addEventListener("click", () => dialog.close());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const error = check(values());
      if (error) {
        problem.textContent = error;
        return;
      }
      result = fields.length ? values() : true;
      dialog.close();
    });
    // Enter in a one-line field submits; in the prompt's textarea Enter starts a line.
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (open === dialog) open = null;
      resolve(result);
    });
    dialog.showModal();
    const first = fields.length ? inputs[fields[0].name] : danger ? cancel : ok;
    first.focus();
    if (first.select) first.select();
  });
}
