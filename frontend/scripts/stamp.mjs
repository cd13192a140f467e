// Records in the build output which sources it was built from (a hash of them) and a hash of
// each built file, so a Python test can tell, without Node, that the committed assets are stale
// or were edited by hand. `--check` only compares (exit 1 when stale).
//
// The hash: sha256 over each source file, in sorted order of its path relative to frontend/,
// of `path NUL content NUL`. tests/gateway/web/test_built_assets.py computes the same.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync, writeFileSync, existsSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const OUT = join(ROOT, "..", "src", "vigil", "gateway", "adapters", "web", "ui");
const SOURCES = ["src", "public", "package.json", "package-lock.json", "vite.config.js"];
const INFO = "build-info.json";

function walk(path) {
  if (!existsSync(path)) return [];
  if (statSync(path).isFile()) return [path];
  return readdirSync(path).flatMap((name) => walk(join(path, name)));
}

const posix = (path) => path.split(sep).join("/");

export function sourceHash() {
  const files = SOURCES.flatMap((name) => walk(join(ROOT, name))).map((p) => [posix(relative(ROOT, p)), p]);
  files.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const hash = createHash("sha256");
  for (const [name, path] of files) {
    hash.update(name).update("\0").update(readFileSync(path)).update("\0");
  }
  return hash.digest("hex");
}

function builtFiles() {
  const out = {};
  for (const path of walk(OUT).sort()) {
    const name = posix(relative(OUT, path));
    if (name === INFO) continue;
    out[name] = createHash("sha256").update(readFileSync(path)).digest("hex");
  }
  return out;
}

if (process.argv.includes("--check")) {
  const info = JSON.parse(readFileSync(join(OUT, INFO), "utf8"));
  if (info.sources !== sourceHash()) {
    console.error("the built web chat is stale: run `npm run build` in frontend/");
    process.exit(1);
  }
  console.log("the built web chat matches its sources");
} else {
  const info = { sources: sourceHash(), files: builtFiles() };
  writeFileSync(join(OUT, INFO), JSON.stringify(info, null, 2) + "\n");
  const sizes = Object.keys(info.files).map((n) => `${n} ${statSync(join(OUT, n)).size} B`);
  console.log(`stamped ${INFO}: ${sizes.join(", ")}`);
}
