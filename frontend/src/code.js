// Syntax highlighting with highlight.js's core and the languages an agent's answers mostly
// hold (the full set would triple the bundle).
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import dockerfile from "highlight.js/lib/languages/dockerfile";
import go from "highlight.js/lib/languages/go";
import ini from "highlight.js/lib/languages/ini";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import plaintext from "highlight.js/lib/languages/plaintext";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const LANGUAGES = {
  bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, markdown, plaintext,
  python, rust, shell, sql, typescript, xml, yaml,
};
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

const escapeHtml = (text) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

// The highlighted HTML of `code` and the language's display name; an unknown or missing
// language is shown as plain text (no guessing: a wrong guess reads worse than none).
export function highlight(code, lang) {
  const language = lang && hljs.getLanguage(lang);
  if (!language) return { html: escapeHtml(code), language: lang || "" };
  try {
    return { html: hljs.highlight(code, { language: lang, ignoreIllegals: true }).value, language: lang };
  } catch {
    return { html: escapeHtml(code), language: lang };
  }
}

export { escapeHtml };
