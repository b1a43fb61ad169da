#!/usr/bin/env node
/**
 * Builds the native addons into dist/native with the system's C compiler and Node's own headers:
 *   native/splice.c  -> splice.node   the sandbox proxy's kernel splice (simulator/proxy/splice.ts)
 *   native/confine.c -> confine.node  openat2 for the agent's kernel-confined files (sandbox-agent/paths/openat2.ts)
 *   native/netns.c   -> netns.node    sockets made in a sandbox's network namespace, for the agent host
 *                                     (simulator/agent-host/netns.ts)
 * Optional: where there is no compiler, no headers or no Linux, it says so in one line per addon and the
 * proxy copies bytes in JS, the agent confines paths with its own descriptor walk (its /health says so).
 * No node-gyp: one C file with N-API needs no build system, and node-gyp would fetch headers from the network.
 * And one program, no addon:
 *   native/nsexec.c  -> nsexec        enters a sandbox's namespaces and runs a command there, for an agent host
 *                                     serving the sandbox from outside (sandbox-agent/process/ns-spawn.ts); linked
 *                                     statically where the C library allows (no dynamic loading per command)
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const ADDONS = [
  { name: "splice", libs: ["-lpthread"], without: "kernel splice not built", fallback: "the sandbox proxy copies bytes in JS" },
  { name: "confine", libs: [], without: "openat2 addon not built", fallback: "the agent confines paths with its descriptor walk" },
  { name: "netns", libs: [], without: "network-namespace addon not built", fallback: "sandboxes keep an agent of their own (no agent host)" },
];

function skip(addon, why) {
  process.stderr.write(`build-native: ${addon.without} (${why}); ${addon.fallback}\n`);
}

const headers = [
  process.env.npm_config_nodedir && join(process.env.npm_config_nodedir, "include", "node"),
  join(dirname(process.execPath), "..", "include", "node"),
  "/usr/include/node",
]
  .filter(Boolean)
  .find((dir) => existsSync(join(dir, "node_api.h")));
const cc = process.env.CC || "cc";
for (const addon of ADDONS) {
  if (process.platform !== "linux") {
    skip(addon, "not Linux");
    continue;
  }
  if (!headers) {
    skip(addon, "no node_api.h: Node's headers are not installed");
    continue;
  }
  const source = join(root, "native", `${addon.name}.c`);
  const target = join(root, "dist", "native", `${addon.name}.node`);
  mkdirSync(dirname(target), { recursive: true });
  try {
    execFileSync(cc, ["-O2", "-Wall", "-shared", "-fPIC", `-DNODE_GYP_MODULE_NAME=${addon.name}`, `-I${headers}`, source, "-o", target, ...addon.libs], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  } catch (err) {
    skip(
      addon,
      `${cc} failed: ${
        String(err.stderr ?? err.message)
          .trim()
          .split("\n")[0]
      }`,
    );
  }
}

function buildNsexec() {
  const without = (why) => process.stderr.write(`build-native: nsexec not built (${why}); commands cannot enter a sandbox from outside\n`);
  if (process.platform !== "linux") return without("not Linux");
  const source = join(root, "native", "nsexec.c");
  const target = join(root, "dist", "native", "nsexec");
  mkdirSync(dirname(target), { recursive: true });
  for (const link of [["-static"], []]) {
    try {
      execFileSync(cc, ["-O2", "-Wall", ...link, source, "-o", target], { stdio: ["ignore", "ignore", "pipe"] });
      return;
    } catch (err) {
      if (link.length === 0)
        without(
          `${cc} failed: ${
            String(err.stderr ?? err.message)
              .trim()
              .split("\n")[0]
          }`,
        );
    }
  }
}
buildNsexec();
