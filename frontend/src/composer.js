// The composer: the message box (Enter sends, Shift+Enter starts a new line), files to send as
// removable chips (picked or dropped; uploaded only when the message is sent), Send and Stop.
import { el, button, formatSize } from "./dom.js";

export class Composer {
  // `onSend(text, files)` returns a promise; `onStop()`.
  constructor(form, { onSend, onStop }) {
    this.form = form;
    this.input = form.querySelector("#input");
    this.chips = form.querySelector("#attachments");
    this.picker = form.querySelector("#upload-input");
    this.stopButton = form.querySelector("#stop");
    this.files = [];
    form.addEventListener("submit", (e) => { e.preventDefault(); this.send(); });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.send(); }
    });
    this.input.addEventListener("input", () => this.autosize());
    form.querySelector("#upload-button").addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => {
      this.add([...(this.picker.files || [])]);
      this.picker.value = "";
    });
    this.stopButton.addEventListener("click", () => onStop());
    this.onSend = onSend;
    const zone = form.closest(".chat") || form;
    zone.addEventListener("dragover", (e) => {
      if (![...(e.dataTransfer?.types || [])].includes("Files")) return;
      e.preventDefault();
      zone.classList.add("dropping");
    });
    zone.addEventListener("dragleave", (e) => { if (e.target === zone) zone.classList.remove("dropping"); });
    zone.addEventListener("drop", (e) => {
      zone.classList.remove("dropping");
      if (!e.dataTransfer?.files?.length) return;
      e.preventDefault();
      this.add([...e.dataTransfer.files]);
    });
  }

  add(files) {
    for (const file of files) {
      this.files.push(file);
      const chip = el("span", "chip");
      chip.append(el("span", "chip-icon", "📄"), el("span", "chip-name", file.name), el("span", "chip-size", formatSize(file.size)));
      const remove = button("×", "chip-remove", { label: `Remove ${file.name}` });
      remove.addEventListener("click", () => {
        this.files = this.files.filter((f) => f !== file);
        chip.remove();
        this.input.focus();
      });
      chip.appendChild(remove);
      chip.file = file;
      this.chips.appendChild(chip);
    }
    this.input.focus();
  }

  async send() {
    const text = this.input.value;
    const files = [...this.files];
    if (!text.trim() && !files.length) return;
    this.input.value = "";
    this.files = [];
    this.chips.replaceChildren();
    this.autosize();
    const kept = await this.onSend(text, files);
    if (kept === false) {  // not sent: give the draft back
      this.input.value = text;
      this.add(files);
      this.autosize();
    }
  }

  setBusy(busy) {
    this.stopButton.hidden = !busy;
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }

  fill(text) {
    this.input.value = text;
    this.autosize();
    this.input.focus();
  }
}
