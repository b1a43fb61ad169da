/**
 * Loads the agent's bundle (agent.cjs, beside this file in dist/agent) with V8's code cache (agent.cjs.cache),
 * made by scripts/bundle-agent.mjs under the agent's V8 flags. A cache V8 rejects (another Node, other flags, a
 * bundle rebuilt without it) costs nothing but its read: V8 compiles from source, as `require` would.
 *
 *   start("main" | "warm")  runs that entry's modules (sandbox-agent/main.ts, simulator/launcher/warm-agent.ts)
 *   node load.cjs --produce-code-cache   (the build) sets up the warm agent's modules and writes the cache
 */
"use strict";
const { readFileSync, writeFileSync } = require("node:fs");
const Module = require("node:module");
const { dirname, join } = require("node:path");
const vm = require("node:vm");

const file = join(__dirname, "agent.cjs");
const cacheFile = `${file}.cache`;

function readCache() {
  try {
    return readFileSync(cacheFile);
  } catch {
    return undefined;
  }
}

/**
 * What `require(file)` does (the module's own require, module and exports), through a vm.Script that takes
 * cachedData. The build wrote the bundle already wrapped as Module.wrap would: its source is compiled as read,
 * with no wrapped copy of its 3.5 MB beside it.
 */
function load() {
  const script = new vm.Script(readFileSync(file, "latin1"), {
    filename: file,
    cachedData: readCache(),
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const bundle = new Module(file, module);
  bundle.filename = file;
  bundle.paths = Module._nodeModulePaths(dirname(file));
  script.runInThisContext()(bundle.exports, Module.createRequire(file), bundle, file, dirname(file));
  bundle.loaded = true;
  return { script, exports: bundle.exports };
}

exports.start = (entry) => {
  load().exports[entry]().catch((err) => {
    // An entry's own failures are its to report; this is a bundle that could not be set up at all.
    process.stderr.write(`sandbox-agent: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
};

if (require.main === module && process.argv[2] === "--produce-code-cache") {
  const { script, exports: entries } = load();
  entries.warm().then(() => {
    // Everything compiled so far (the modules' set-up, run) goes into the cache, not just the top level.
    writeFileSync(cacheFile, script.createCachedData());
    process.exit(0);
  }, (err) => {
    process.stderr.write(`the agent's code cache could not be made: ${err.stack ?? err}\n`);
    process.exit(1);
  });
}
