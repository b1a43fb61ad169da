#!/usr/bin/env node
/**
 * Bundles the compiled agent (dist/sandbox-agent/main.js, and the warm agent the launchers pre-start,
 * dist/simulator/launcher/warm-agent.js) into one CommonJS file, dist/agent/agent.cjs, with V8's code cache for
 * it beside it (agent.cjs.cache), and turns those two entry files into one-line stubs that start their part of
 * the bundle, so every launcher, the `sandbox-agent` bin and the Docker image keep their paths. Why: an agent
 * start is CPU-bound, and most of it was Node resolving, reading and compiling some 380 modules one by one (a
 * bundle is one file) and V8 compiling the bundle (the code cache hands V8 the bytecode of everything that ran
 * while the bundle's modules were set up). CommonJS, because Node 20 keeps no code cache for ES modules and
 * vm.Script takes one for a script (Node 22's module.enableCompileCache does not exist here).
 *
 * Each entry is reached through a lazy import() in a synthetic entry module: esbuild wraps the modules behind it
 * in lazy initialisers, so loading the bundle runs nothing, and `start("main")` or `start("warm-agent")` runs
 * exactly the module graph the entry had. The cache is produced here by running a warm agent once (the agent's
 * whole graph but for main.ts: activated on a temp data dir and loopback, asked for /health and one command;
 * scripts/agent-loader.cjs) under the agent's own V8 flags: V8 rejects a cache made under other flags or another V8 (the loader then compiles from source, as
 * without a cache). Code loaded on first use (the MCP server's session module, chrono-node) is in the bundle but
 * compiled only when first called. Native addons stay in node_modules, resolved from the bundle's place in the
 * package as before: node-pty whole (loaded on a terminal's first use), better-sqlite3's addon alone (its
 * JavaScript is in the bundle).
 *
 * `import.meta.url` of each bundled module of the package is rewritten to that module's original place in dist/
 * (relative to the bundle, so a package moved elsewhere or bound into a sandbox still works): the search worker
 * and the package.json lookup find their files as when unbundled.
 */
import { execFileSync } from "node:child_process";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const outdir = join(dist, "agent");
const bundle = join(outdir, "agent.cjs");
const entries = { main: join(dist, "sandbox-agent", "main.js"), "warm-agent": join(dist, "simulator", "launcher", "warm-agent.js") };
// The agent's V8 flags (simulator/launcher/agent-main.ts AGENT_NODE_FLAGS): the cache must be made under them.
const { AGENT_NODE_FLAGS } = await import(join(dist, "simulator", "launcher", "agent-main.js"));

const EXTERNAL = ["node-pty"];
// better-sqlite3's JavaScript is bundled, so it comes from the code cache instead of being resolved, read and
// compiled from node_modules at every start (~5 ms of CPU); its native addon stays in node_modules, required from
// the bundle's place in the package where the package's `bindings` lookup would find it (build/Release), since
// `bindings` finds it from the calling file's path, which in a bundle is the bundle's.
const SQLITE_BINDING = "require('bindings')('better_sqlite3.node')";
const SQLITE_ADDON = "better-sqlite3/build/Release/better_sqlite3.node";
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
      if (args.path.endsWith(join("better-sqlite3", "lib", "database.js"))) {
        if (!contents.includes(SQLITE_BINDING))
          throw new Error(`${args.path} no longer loads its addon through ${SQLITE_BINDING}: see scripts/bundle-agent.mjs`);
        contents = contents.replace(SQLITE_BINDING, `require(${JSON.stringify(SQLITE_ADDON)})`);
      }
      // A lazy import() of a native addon would stay an import() in CommonJS, which a vm.Script can only run
      // through an experimental loader hook (and its warning): it becomes the require() it amounts to.
      for (const name of EXTERNAL)
        contents = contents.replaceAll(`import(${JSON.stringify(name)})`, `Promise.resolve().then(() => require(${JSON.stringify(name)}))`);
      if (args.path.startsWith(dist) && contents.includes("import.meta.url")) {
        const from = JSON.stringify(relative(outdir, args.path));
        contents = contents.replaceAll("import.meta.url", `new URL(${from}, __bundleUrl).href`);
      }
      return { contents, loader: "js", resolveDir: dirname(args.path) };
    });
  },
};

await rm(outdir, { recursive: true, force: true }); // no chunks of earlier builds left behind
await mkdir(outdir, { recursive: true });
const result = await esbuild.build({
  stdin: {
    contents: Object.entries(entries)
      .map(([name, source]) => `export const ${name === "main" ? "main" : "warm"} = () => import(${JSON.stringify(source)});`)
      .join("\n"),
    resolveDir: dist,
    loader: "js",
  },
  outfile: bundle,
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  external: [...EXTERNAL, SQLITE_ADDON],
  // Dependencies' own import.meta.url (ES modules in node_modules) is the bundle's, as it was in the ESM bundle.
  banner: { js: 'const __bundleUrl = require("node:url").pathToFileURL(__filename).href;' },
  define: { "import.meta.url": "__bundleUrl" },
  legalComments: "none",
  logLevel: "warning",
  metafile: true,
  plugins: [keepMetaUrl],
});

// Wrapped as Module.wrap wraps a CommonJS module, so the loader compiles the file as read (scripts/agent-loader.cjs).
// esbuild escapes every non-ASCII character of the code (charset ascii): what is left is in comments, made "?" so
// the file is ASCII, read as latin1 without decoding and held by V8 as a one-byte string (half of a two-byte one).
const code = (await readFile(bundle, "utf8")).replace(/[^\x00-\x7f]/g, "?");
const dynamicImport = /[^\w$.]import\("/.exec(code); // esbuild prints every string with double quotes
if (dynamicImport) throw new Error(`${bundle} has an import() the loader cannot run: ${code.slice(dynamicImport.index, dynamicImport.index + 80)}`);
await writeFile(bundle, `(function (exports, require, module, __filename, __dirname) { ${code}\n});`);

// The loader and the stubs: the loader compiles the bundle with its cache (scripts/agent-loader.cjs).
await copyFile(join(root, "scripts", "agent-loader.cjs"), join(outdir, "load.cjs"));
await writeFile(
  join(outdir, "warm-agent.cjs"),
  `// ${STUB_MARK}: the warm agent, started as CommonJS (no ES module loader to set up).\nrequire("./load.cjs").start("warm");\n`,
);
for (const [name, source] of Object.entries(entries)) {
  const target = relative(dirname(source), join(outdir, "load.cjs"));
  await writeFile(
    source,
    `#!/usr/bin/env node\n// ${STUB_MARK}: one file to load, compiled from V8's code cache.\nimport { createRequire } from "node:module";\ncreateRequire(import.meta.url)(${JSON.stringify(target)}).start(${JSON.stringify(name === "main" ? "main" : "warm")});\n`,
  );
}
execFileSync(process.execPath, [...AGENT_NODE_FLAGS, join(outdir, "load.cjs"), "--produce-code-cache"], { stdio: "inherit" });
const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
process.stdout.write(
  `agent bundle: ${(bytes / 1048576).toFixed(1)} MiB in dist/agent/agent.cjs, code cache ${((await readFile(`${bundle}.cache`)).length / 1048576).toFixed(1)} MiB\n`,
);
