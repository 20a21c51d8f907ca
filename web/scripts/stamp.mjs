// Records which sources the build in src/sleuth/web/static was made from: a sha256 over the
// app's sources (tests excluded). tests/unit/test_web.py recomputes it, so a change to web/
// without a rebuild fails the Python tests.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const web = fileURLToPath(new URL("..", import.meta.url));
const files = [];
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (!name.includes(".test.")) files.push(relative(web, path).split(sep).join("/"));
  }
}
walk(join(web, "src"));
files.push("index.html", "vite.config.ts", "package.json", "package-lock.json");
files.sort();
const hash = createHash("sha256");
for (const f of files) {
  hash.update(f + "\0");
  hash.update(readFileSync(join(web, f)));
  hash.update("\0");
}
const out = join(web, "..", "src", "sleuth", "web", "static", "build.json");
writeFileSync(out, JSON.stringify({ source_hash: hash.digest("hex"), files }, null, 2) + "\n");
console.log(`stamped ${out}`);
