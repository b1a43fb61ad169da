#!/usr/bin/env node
// The package's types are its public API only: keep dist/index.d.ts and the declaration files it reaches
// through relative imports, and remove every other .d.ts the build emitted (internal modules stay
// implementation, free to change without breaking a consumer's type-check).
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const dist = resolve(process.argv[2] ?? "dist");
const SPECIFIER = /(?:from\s+|import\s*\(\s*)["'](\.{1,2}\/[^"']+)["']/g;

const keep = new Set();
const queue = [join(dist, "index.d.ts")];
while (queue.length) {
  const file = queue.pop();
  if (keep.has(file)) continue;
  keep.add(file);
  for (const [, spec] of readFileSync(file, "utf8").matchAll(SPECIFIER)) {
    queue.push(resolve(dirname(file), spec.replace(/\.js$/, ".d.ts")));
  }
}

function walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path);
    else if (entry.name.endsWith(".d.ts") && !keep.has(path)) rmSync(path);
  }
}
walk(dist);
