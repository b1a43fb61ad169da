import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** Names of the generated control-plane functions in @blaxel/core's sdk.gen.js (the package exports them only through its root). */
export function sdkOperationNames(): string[] {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve("@blaxel/core/package.json"));
  const text = readFileSync(join(root, "dist/esm/client/sdk.gen.js"), "utf8");
  return [...text.matchAll(/^export const (\w+) = \(options\) =>/gm)].map((m) => m[1]!).sort();
}
