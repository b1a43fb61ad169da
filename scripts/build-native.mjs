#!/usr/bin/env node
/**
 * Builds the native parts with the system's C compiler, each optional: where there is no compiler, no headers
 * or no Linux, it says so in one line and what uses it falls back.
 * - native/splice.c -> dist/native/splice.node: the sandbox proxy's kernel splice (simulator/proxy/splice.ts),
 *   with Node's own headers; without it the proxy copies bytes in JS. No node-gyp: one C file with N-API needs
 *   no build system, and node-gyp would fetch headers from the network.
 * - native/nsexec.c -> dist/native/nsexec: a program (no addon) that enters a sandbox's namespaces and runs a
 *   command there (sandbox-agent/process/ns-spawn.ts), linked statically where the C library allows (no dynamic
 *   loading on each command's start); without it commands enter through nsenter(1) and the kit's setpriv.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = join(root, "dist", "native");
const cc = process.env.CC || "cc";

function firstLine(err) {
  return String(err.stderr ?? err.message)
    .trim()
    .split("\n")[0];
}

function compile(args) {
  execFileSync(cc, args, { stdio: ["ignore", "ignore", "pipe"] });
}

function buildSplice() {
  const skip = (why) => process.stderr.write(`build-native: kernel splice not built (${why}); the sandbox proxy copies bytes in JS\n`);
  const headers = [
    process.env.npm_config_nodedir && join(process.env.npm_config_nodedir, "include", "node"),
    join(dirname(process.execPath), "..", "include", "node"),
    "/usr/include/node",
  ]
    .filter(Boolean)
    .find((dir) => existsSync(join(dir, "node_api.h")));
  if (!headers) return skip("no node_api.h: Node's headers are not installed");
  const source = join(root, "native", "splice.c");
  const target = join(outDir, "splice.node");
  try {
    compile(["-O2", "-Wall", "-shared", "-fPIC", "-DNODE_GYP_MODULE_NAME=splice", `-I${headers}`, source, "-o", target, "-lpthread"]);
  } catch (err) {
    skip(`${cc} failed: ${firstLine(err)}`);
  }
}

function buildNsexec() {
  const source = join(root, "native", "nsexec.c");
  const target = join(outDir, "nsexec");
  try {
    compile(["-O2", "-Wall", "-static", source, "-o", target]);
  } catch {
    try {
      compile(["-O2", "-Wall", source, "-o", target]);
    } catch (err) {
      process.stderr.write(`build-native: nsexec not built (${cc} failed: ${firstLine(err)}); commands enter sandboxes through nsenter(1)\n`);
    }
  }
}

if (process.platform !== "linux") {
  process.stderr.write("build-native: not Linux: no kernel splice (the proxy copies bytes in JS), no nsexec\n");
  process.exit(0);
}
mkdirSync(outDir, { recursive: true });
buildSplice();
buildNsexec();
