import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { consoleDistDir, packageRoot } from "../../src/package-paths.js";

/**
 * Bundles the console (console/src) into dist/console: one JS and one CSS file
 * with content hashes in their names (served immutable), and index.html
 * naming them (served no-cache). preact, htm and uPlot are bundled in: no CDN.
 */
export async function buildConsole(root = packageRoot()): Promise<{ script: string; style: string }> {
  const out = consoleDistDir(root);
  const assets = join(out, "assets");
  const staging = join(out, `.assets-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: { app: "console/src/main.ts", style: "console/src/style.css" },
    bundle: true,
    format: "esm",
    target: ["chrome110", "firefox110", "safari16"],
    minify: true,
    sourcemap: false,
    legalComments: "eof",
    entryNames: "[name]-[hash]",
    outdir: staging,
    metafile: true,
    logLevel: "warning",
  });
  const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
  const script = outputs.find((f) => /^app-\w+\.js$/.test(f));
  const style = outputs.find((f) => /^style-\w+\.css$/.test(f));
  if (!script || !style) throw new Error(`console build: unexpected outputs ${outputs.join(", ")}`);
  // Swap the whole assets folder at once, then write the page naming the new files.
  rmSync(assets, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  renameSync(staging, assets);
  const page = readFileSync(join(root, "console", "src", "index.html"), "utf8")
    .replace("{{style}}", `/console/assets/${style}`)
    .replace("{{script}}", `/console/assets/${script}`);
  writeFileSync(join(out, "index.html.tmp"), page);
  renameSync(join(out, "index.html.tmp"), join(out, "index.html"));
  return { script, style };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { script, style } = await buildConsole();
  process.stdout.write(`console: dist/console/assets/${script}, ${style} (${readdirSync(join(consoleDistDir(), "assets")).length} files)\n`);
}
