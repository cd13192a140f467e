// A small, safe Markdown renderer for model answers.
//
// Safety: the input is never parsed as HTML. Every piece of text reaches the page through
// document.createTextNode / textContent, so "<script>" or "<img onerror=...>" in an answer is
// shown exactly as written; elements are only ever made with createElement, and links only for
// http(s) URLs. Supported: fenced and indented code blocks, inline code, bold, italic,
// links, bare URLs, bullet and numbered lists, headings, block quotes, rules, paragraphs.

const INLINE = [
  { kind: "code", re: /`([^`\n]+)`/ },
  { kind: "link", re: /\[([^\]\n]+)\]\(([^)\s]+)\)/ },
  { kind: "url", re: /\bhttps?:\/\/[^\s<>()"']+[^\s<>()"'.,;:!?]/ },
  { kind: "strong", re: /\*\*([^*\n](?:[^\n]*?[^*\n])?)\*\*/ },
  { kind: "strong", re: /(?<![\w])__([^_\n](?:[^\n]*?[^_\n])?)__(?![\w])/ },
  { kind: "em", re: /(?<![*\w])\*([^*\s](?:[^*\n]*?[^*\s])?)\*(?![*\w])/ },
  { kind: "em", re: /(?<![_\w])_([^_\s](?:[^_\n]*?[^_\s])?)_(?![_\w])/ },
];

export function safeHref(raw) {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

function link(text, href, parent) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  renderInline(text, a);
  parent.appendChild(a);
}

// Append `text` to `parent`, turning inline Markdown into elements.
export function renderInline(text, parent) {
  let rest = text;
  while (rest) {
    let best = null;
    for (const rule of INLINE) {
      const m = rule.re.exec(rest);
      if (m && (best === null || m.index < best.m.index)) best = { rule, m };
    }
    if (best === null) {
      parent.appendChild(document.createTextNode(rest));
      return;
    }
    const { rule, m } = best;
    if (m.index > 0) parent.appendChild(document.createTextNode(rest.slice(0, m.index)));
    if (rule.kind === "code") {
      const code = document.createElement("code");
      code.textContent = m[1];
      parent.appendChild(code);
    } else if (rule.kind === "link") {
      const href = safeHref(m[2]);
      if (href) link(m[1], href, parent);
      else parent.appendChild(document.createTextNode(m[0]));
    } else if (rule.kind === "url") {
      const href = safeHref(m[0]);
      if (href) link(m[0], href, parent);
      else parent.appendChild(document.createTextNode(m[0]));
    } else {
      const el = document.createElement(rule.kind);
      renderInline(m[1], el);
      parent.appendChild(el);
    }
    rest = rest.slice(m.index + m[0].length);
  }
}

function inlineLines(lines, parent) {
  lines.forEach((line, i) => {
    if (i > 0) parent.appendChild(document.createElement("br"));
    renderInline(line, parent);
  });
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+.-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^(\s*)[-*+]\s+(.*)$/;
const NUMBERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

function isBlockStart(line) {
  return FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || NUMBERED.test(line)
    || QUOTE.test(line) || RULE.test(line);
}

// Render a whole Markdown text into a DocumentFragment.
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++; // the closing fence (or the end of an answer still streaming)
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (fence[2]) code.dataset.lang = fence[2];
      code.textContent = body.join("\n");
      pre.appendChild(code);
      out.appendChild(pre);
      continue;
    }
    if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || !lines[i].trim())) body.push(lines[i++].replace(/^( {4}|\t)/, ""));
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.textContent = body.join("\n").replace(/\n+$/, "");
      pre.appendChild(code);
      out.appendChild(pre);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const h = document.createElement(`h${Math.min(6, heading[1].length + 2)}`);
      renderInline(heading[2], h);
      out.appendChild(h);
      i++;
      continue;
    }
    if (RULE.test(line)) { out.appendChild(document.createElement("hr")); i++; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(QUOTE.exec(lines[i++])[1]);
      const quote = document.createElement("blockquote");
      quote.appendChild(renderMarkdown(body.join("\n")));
      out.appendChild(quote);
      continue;
    }
    if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = !BULLET.test(line);
      const list = document.createElement(ordered ? "ol" : "ul");
      if (ordered) {
        const start = Number(NUMBERED.exec(line)[2]);
        if (start !== 1) list.start = start;
      }
      const pattern = ordered ? NUMBERED : BULLET;
      while (i < lines.length && pattern.test(lines[i])) {
        const m = pattern.exec(lines[i++]);
        const item = [m[ordered ? 3 : 2]];
        while (i < lines.length && lines[i].trim() && /^\s{2,}/.test(lines[i]) && !pattern.test(lines[i])) item.push(lines[i++].trim());
        const li = document.createElement("li");
        inlineLines(item, li);
        list.appendChild(li);
      }
      out.appendChild(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !(para.length && isBlockStart(lines[i]))) para.push(lines[i++]);
    const p = document.createElement("p");
    inlineLines(para, p);
    out.appendChild(p);
  }
  return out;
}
