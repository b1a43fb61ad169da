#!/usr/bin/env node
/**
 * Bundles the compiled agent (dist/sandbox-agent/main.js, and the warm agent the launchers pre-start,
 * dist/simulator/launcher/warm-agent.js) into dist/agent/ with esbuild, and turns those two files into one-line
 * stubs that import their bundle, so every launcher, the `sandbox-agent` bin and the Docker image keep their
 * paths. Why: an agent start is CPU-bound, and most of it was Node resolving, reading and compiling some 380
 * modules one by one; a bundle is a few files. Code loaded on first use (the MCP server's session module) stays
 * in its own chunk (splitting), so a start never reads it. Native addons (better-sqlite3, node-pty) stay in
 * node_modules, resolved from the bundle's place in the package as before.
 *
 * `import.meta.url` of each bundled module is rewritten to that module's original place in dist/ (relative to
 * the bundle, so a package moved elsewhere or bound into a sandbox still works): the search worker and the
 * package.json lookup find their files as when unbundled.
 */
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const outdir = join(dist, "agent");
const entries = { main: join(dist, "sandbox-agent", "main.js"), "warm-agent": join(dist, "simulator", "launcher", "warm-agent.js") };

const STUB_MARK = "The bundle (scripts/bundle-agent.mjs)";
for (const source of Object.values(entries)) {
  // Bundling a stub would make a bundle of the bundle: tsc must have written the entry points afresh.
  if ((await readFile(source, "utf8")).includes(STUB_MARK)) throw new Error(`${source} is already a stub: run tsc (npm run build) first`);
}

const keepMetaUrl = {
  name: "keep-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.js$/ }, async (args) => {
      let contents = await readFile(args.path, "utf8");
      if (args.path.startsWith(dist) && contents.includes("import.meta.url")) {
        const from = JSON.stringify(relative(outdir, args.path));
        contents = contents.replaceAll("import.meta.url", `new URL(${from}, import.meta.url).href`);
      }
      return { contents, loader: "js", resolveDir: dirname(args.path) };
    });
  },
};

const result = await esbuild.build({
  entryPoints: entries,
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: ["better-sqlite3", "node-pty"],
  // CommonJS dependencies bundled into ESM still call require() for Node's built-ins.
  banner: { js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);' },
  legalComments: "none",
  logLevel: "warning",
  metafile: true,
  plugins: [keepMetaUrl],
});

for (const [name, source] of Object.entries(entries)) {
  const target = relative(dirname(source), join(outdir, `${name}.js`));
  await writeFile(source, `#!/usr/bin/env node\n// ${STUB_MARK}: one file to load instead of hundreds of modules.\nimport "${target.startsWith(".") ? target : `./${target}`}";\n`);
}
const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
process.stdout.write(`agent bundle: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1048576).toFixed(1)} MiB in dist/agent\n`);
