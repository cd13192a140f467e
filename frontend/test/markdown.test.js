import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../src/markdown.js";

function draw(text) {
  const box = document.createElement("div");
  box.innerHTML = renderMarkdown(text);
  return box;
}

const ALLOWED_TAGS = new Set([
  "P", "BR", "STRONG", "EM", "CODE", "PRE", "A", "UL", "OL", "LI", "H3", "H4", "H5", "H6",
  "BLOCKQUOTE", "HR", "DIV", "SPAN", "BUTTON", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "S",
]);
const ALLOWED_ATTRIBUTES = new Set(["href", "rel", "target", "class", "type", "data-copy", "aria-label", "start", "style", "tabindex"]);

// Every hostile answer the browser tests send, and a few more.
const HOSTILE = [
  "<script>window.__pwned = 1</script>",
  '<img src=x onerror="window.__pwned = 2">',
  "**<b onmouseover=alert(1)>bold</b>** and `<i>code</i>`",
  "[click](javascript:window.__pwned=3) [data](data:text/html,<script>x</script>) [ok](https://example.com/a?b=<c>)",
  '```html\n<iframe src="https://evil.example"></iframe>\n```',
  '# <svg onload=alert(1)>\n- <a href="javascript:x">list</a>\n> <style>body{display:none}</style>',
  '<script>window.__pwned = 1</script> and <img src=x onerror="window.__pwned = 2"> [link](javascript:window.__pwned=3)',
  "![x](javascript:alert(1)) ![y](https://example.com/y.png)",
  "[a](JaVaScRiPt:alert(1)) [b](vbscript:x) [c](file:///etc/passwd) <javascript:alert(1)>",
  "```js\" onmouseover=\"alert(1)\nx\n```",
];

describe("renderMarkdown", () => {
  it("turns a bare URL into a working link (and does not recurse on it)", () => {
    const box = draw("See https://example.com/docs?page=2. And www.example.org too");
    const links = [...box.querySelectorAll("a")];
    expect(links.map((a) => a.getAttribute("href"))).toEqual(["https://example.com/docs?page=2", "http://www.example.org"]);
    expect(links[0].textContent).toBe("https://example.com/docs?page=2");
    expect(links[0].getAttribute("target")).toBe("_blank");
    expect(links[0].getAttribute("rel")).toBe("noopener noreferrer");
  });

  it("keeps a Markdown link whose text is the URL itself", () => {
    const box = draw("[https://example.com](https://example.com) and <https://example.net>");
    expect([...box.querySelectorAll("a")].map((a) => a.href)).toEqual(["https://example.com/", "https://example.net/"]);
  });

  it("draws nested emphasis, lists, quotes and headings", () => {
    const box = draw("# Title\n\n**bold _and italic_** text\n\n- one\n- *two*\n\n> quoted `code`");
    expect(box.querySelector("h3").textContent).toBe("Title");
    expect(box.querySelector("strong em").textContent).toBe("and italic");
    expect([...box.querySelectorAll("li")].map((li) => li.textContent)).toEqual(["one", "two"]);
    expect(box.querySelector("li em").textContent).toBe("two");
    expect(box.querySelector("blockquote code").textContent).toBe("code");
  });

  it("keeps a single line break inside a paragraph", () => {
    const box = draw("first line\nsecond line");
    expect(box.querySelector("p br")).not.toBeNull();
  });

  it("highlights a fenced code block and names its language, with a Copy button", () => {
    const box = draw("```python\ndef add(a, b):\n    return a + b\n```");
    const block = box.querySelector(".code-block");
    expect(block.querySelector(".code-lang").textContent).toBe("python");
    expect(block.querySelector("button").textContent).toBe("Copy");
    const code = block.querySelector("pre code");
    expect(code.classList.contains("language-python")).toBe(true);
    expect(code.textContent).toBe("def add(a, b):\n    return a + b");
    expect(code.querySelector(".hljs-keyword").textContent).toBe("def");
  });

  it("shows code of an unknown language as plain text", () => {
    const box = draw("```klingon\nqapla' <b>\n```\n\n    indented <i>");
    const codes = [...box.querySelectorAll("pre code")];
    expect(codes.map((c) => c.textContent)).toEqual(["qapla' <b>", "indented <i>"]);
    expect(box.querySelectorAll("pre code span").length).toBe(0);
    expect(box.querySelector(".code-lang").textContent).toBe("klingon");
  });

  it("shows an unfinished fence while it streams", () => {
    const box = draw("Here:\n```bash\nls -la");
    expect(box.querySelector("pre code").textContent).toBe("ls -la");
  });

  it.each(HOSTILE)("never makes markup or a script link from %s", (input) => {
    const box = draw(input);
    const elements = [...box.querySelectorAll("*")];
    expect(elements.map((e) => e.tagName).filter((t) => !ALLOWED_TAGS.has(t))).toEqual([]);
    const attributes = elements.flatMap((e) => [...e.attributes].map((a) => a.name));
    expect(attributes.filter((a) => !ALLOWED_ATTRIBUTES.has(a))).toEqual([]);
    for (const a of box.querySelectorAll("a")) expect(a.getAttribute("href")).toMatch(/^(https?:|mailto:)/);
    expect(window.__pwned).toBeUndefined();
  });

  it("shows hostile HTML exactly as written", () => {
    expect(draw(HOSTILE[0]).textContent).toBe("<script>window.__pwned = 1</script>");
    expect(draw(HOSTILE[1]).textContent).toBe('<img src=x onerror="window.__pwned = 2">');
    const mixed = draw(HOSTILE[2]).textContent;
    expect(mixed).toContain("<b onmouseover=alert(1)>bold</b>");
    expect(mixed).toContain("<i>code</i>");
    expect(draw(HOSTILE[4]).querySelector("code").textContent).toBe('<iframe src="https://evil.example"></iframe>');
    const links = [...draw(HOSTILE[3]).querySelectorAll("a")].map((a) => a.getAttribute("href"));
    expect(links).toEqual(["https://example.com/a?b=%3Cc%3E"]);
  });

  it("shows an image as a link to it, never loading it", () => {
    const box = draw("![a chart](https://example.com/c.png)");
    expect(box.querySelector("img")).toBeNull();
    expect(box.querySelector("a").getAttribute("href")).toBe("https://example.com/c.png");
    expect(box.querySelector("a").textContent).toBe("a chart");
  });
});
