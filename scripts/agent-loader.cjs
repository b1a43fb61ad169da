/**
 * Loads the agent's bundle (agent.cjs, beside this file in dist/agent) with V8's code cache (agent.cjs.cache),
 * made by scripts/bundle-agent.mjs under the agent's V8 flags. A cache V8 rejects (another Node, other flags, a
 * bundle rebuilt without it) costs nothing but its read: V8 compiles from source, as `require` would.
 *
 *   start("main" | "warm")  runs that entry's modules (sandbox-agent/main.ts, simulator/launcher/warm-agent.ts)
 *   node load.cjs --produce-code-cache   (the build) runs a warm agent once and writes the cache
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
function load(filename = file) {
  const script = new vm.Script(readFileSync(file, "latin1"), {
    filename,
    cachedData: readCache(),
  });
  const bundle = new Module(file, module);
  bundle.filename = file;
  bundle.paths = Module._nodeModulePaths(dirname(file));
  script.runInThisContext()(bundle.exports, Module.createRequire(file), bundle, file, dirname(file));
  bundle.loaded = true;
  return { script, exports: bundle.exports };
}

exports.start = (entry) => {
  load()
    .exports[entry]()
    .catch((err) => {
      // An entry's own failures are its to report; this is a bundle that could not be set up at all.
      process.stderr.write(`sandbox-agent: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    });
};

/**
 * The build's run: the warm agent's modules set up, then activated as a launcher activates one (a data dir of its
 * own under the temp dir, a loopback port) and asked what every sandbox is asked first (/health, a command run to
 * completion), so the cache also holds what an activation and a first request compile, not only the modules'
 * set-up. Only loopback and the temp dir are touched; the process exits once the cache is written.
 */
async function produceCodeCache() {
  const { mkdtempSync, rmSync } = require("node:fs");
  const { randomBytes } = require("node:crypto");
  const { request } = require("node:http");
  const { tmpdir } = require("node:os");
  // V8 (11.3) keeps the file name a cache was made under, whatever name later loads give: made under the
  // package-relative name, stack traces name the bundle alike on the host and in a sandbox, never the build's path.
  const { script, exports: entries } = load("dist/agent/agent.cjs");
  const dir = mkdtempSync(join(tmpdir(), "sandbox-agent-code-cache-"));
  try {
    await entries.warm();
    const token = randomBytes(16).toString("hex");
    const write = process.stdout.write.bind(process.stdout);
    const url = new Promise((resolve) => {
      process.stdout.write = (chunk, ...rest) => {
        const m = /listening on (http:\/\/\S+)/.exec(String(chunk));
        if (m) return (resolve(m[1]), true);
        return write(chunk, ...rest);
      };
    });
    const argv = [
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--root",
      join(dir, "root"),
      "--data-dir",
      join(dir, "data"),
      "--sandbox-name",
      "code-cache",
      "--log-level",
      "warn",
    ];
    process.emit("message", { argv, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, SANDBOX_AGENT_TOKEN: token } });
    const base = await url;
    const call = (method, path, body) =>
      new Promise((resolve, reject) => {
        const req = request(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }, (res) => {
          res.resume().once("end", () => (res.statusCode < 300 ? resolve() : reject(new Error(`${method} ${path}: ${res.statusCode}`))));
        });
        req.once("error", reject).end(body && JSON.stringify(body));
      });
    await call("GET", "/health");
    await call("POST", "/process", { command: "true", waitForCompletion: true });
    // Everything compiled so far goes into the cache, not just the top level.
    writeFileSync(cacheFile, script.createCachedData());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module && process.argv[2] === "--produce-code-cache") {
  produceCodeCache().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`the agent's code cache could not be made: ${err.stack ?? err}\n`);
      process.exit(1);
    },
  );
}
