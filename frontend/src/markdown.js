// Model answers as Markdown, through markdown-it with raw HTML disabled: any "<script>" or
// "<img onerror=…>" in an answer is escaped into text. Links are kept only for http(s) and
// mailto; bare URLs become links (linkify). Fenced code gets a header with its language and a
// Copy button, and is highlighted.
import MarkdownIt from "markdown-it";
import { highlight, escapeHtml } from "./code.js";

const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });

const SAFE_LINK = /^(https?:|mailto:)/i;
md.validateLink = (url) => SAFE_LINK.test(url.trim());

const defaultLinkOpen = md.renderer.rules.link_open
  || ((tokens, idx, options, env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx].attrSet("target", "_blank");
  tokens[idx].attrSet("rel", "noopener noreferrer");
  return defaultLinkOpen(tokens, idx, options, env, self);
};

// Headings start at h3: the page's own headings are h1 and h2.
md.renderer.rules.heading_open = (tokens, idx) => `<h${Math.min(6, Number(tokens[idx].tag.slice(1)) + 2)}>`;
md.renderer.rules.heading_close = (tokens, idx) => `</h${Math.min(6, Number(tokens[idx].tag.slice(1)) + 2)}>\n`;

// Images are shown as links: an answer must not make the browser fetch anything by itself.
md.renderer.rules.image = (tokens, idx) => {
  const token = tokens[idx];
  const src = token.attrGet("src") || "";
  const alt = escapeHtml(token.content || src);
  if (!SAFE_LINK.test(src)) return alt;
  return `<a href="${escapeHtml(src)}" target="_blank" rel="noopener noreferrer">${alt}</a>`;
};

function codeBlock(code, lang) {
  const { html, language } = highlight(code.replace(/\n$/, ""), lang);
  const label = language ? escapeHtml(language) : "text";
  const cls = language ? ` class="hljs language-${escapeHtml(language)}"` : ` class="hljs"`;
  return `<div class="code-block"><div class="code-head"><span class="code-lang">${label}</span>`
    + `<button type="button" class="copy" data-copy="code" aria-label="Copy">Copy</button></div>`
    + `<pre tabindex="0"><code${cls}>${html}</code></pre></div>\n`;
}

md.renderer.rules.fence = (tokens, idx) => {
  const token = tokens[idx];
  const lang = (token.info || "").trim().split(/\s+/)[0].toLowerCase().replace(/[^\w+#.-]/g, "");
  return codeBlock(token.content, lang);
};
md.renderer.rules.code_block = (tokens, idx) => codeBlock(tokens[idx].content, "");

// An answer's text as safe HTML. The newlines markdown-it puts after block tags are dropped
// (outside code), so the text reads as shown: a literal ">" in text is always escaped, so
// ">\n" outside <pre> is always a tag's end. (Code scrolls sideways: it can take the focus.)
export function renderMarkdown(text) {
  return md.render(String(text ?? ""))
    .split(/(<pre[^>]*>[\s\S]*?<\/pre>)/)
    .map((part, i) => (i % 2 ? part : part.replace(/>\n/g, ">")))
    .join("");
}

// Draw `text` as Markdown into `element`.
export function setMarkdown(element, text) {
  element.innerHTML = renderMarkdown(text);
}
