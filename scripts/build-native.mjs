#!/usr/bin/env node
/**
 * Builds native/splice.c into dist/native/splice.node (the sandbox proxy's kernel
 * splice, simulator/proxy/splice.ts) with the system's C compiler and Node's own
 * headers. Optional: where there is no compiler, no headers or no Linux, it says
 * so in one line and the proxy copies bytes in JS instead. No node-gyp: one C file
 * with N-API needs no build system, and node-gyp would fetch headers from the network.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "native", "splice.c");
const target = join(root, "dist", "native", "splice.node");

function skip(why) {
  process.stderr.write(`build-native: kernel splice not built (${why}); the sandbox proxy copies bytes in JS\n`);
  process.exit(0);
}

if (process.platform !== "linux") skip("not Linux");
const headers = [
  process.env.npm_config_nodedir && join(process.env.npm_config_nodedir, "include", "node"),
  join(dirname(process.execPath), "..", "include", "node"),
  "/usr/include/node",
]
  .filter(Boolean)
  .find((dir) => existsSync(join(dir, "node_api.h")));
if (!headers) skip("no node_api.h: Node's headers are not installed");
const cc = process.env.CC || "cc";
mkdirSync(dirname(target), { recursive: true });
try {
  execFileSync(cc, ["-O2", "-Wall", "-shared", "-fPIC", "-DNODE_GYP_MODULE_NAME=splice", `-I${headers}`, source, "-o", target, "-lpthread"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
} catch (err) {
  skip(
    `${cc} failed: ${
      String(err.stderr ?? err.message)
        .trim()
        .split("\n")[0]
    }`,
  );
}
