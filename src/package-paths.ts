import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The package root, found from this file's location whether it runs compiled
 * (dist/src) or from source (src/, under vitest).
 */
export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  for (let dir = dirname(from); ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "sandbox-kit") return dir;
    if (dirname(dir) === dir) throw new Error(`no sandbox-kit package.json above ${from}`);
  }
}

/** Where the built console lives: dist/console/{index.html, assets/}. */
export const consoleDistDir = (root = packageRoot()) => join(root, "dist", "console");
