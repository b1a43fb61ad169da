import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./agent.js";

/**
 * A process of the sandbox flipping one name between a real directory and symlinks, as fast as it can:
 * renameat2(RENAME_EXCHANGE) swaps `name` with each link in turn and back, so `name` always exists and
 * is, at any instant, either the directory or one of the links (the kernel swaps both names at once).
 * Runs with the root as its working directory; `links` are names there. Falls back to plain renames
 * (a gap where `name` is missing) where no C compiler is found.
 */
const SOURCE = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
int main(int argc, char **argv) {
  long ms = atol(argv[1]);
  const char *name = argv[2];
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long swaps = 0;
  if (nice(10) == -1) { /* the agent gets the CPU first; the swapper fills the rest */ }
  for (;;) {
    for (int i = 3; i < argc; i++) {
      for (int k = 0; k < 2; k++) {
        for (int spin = 0; spin < 64; spin++)
          if (syscall(SYS_renameat2, AT_FDCWD, name, AT_FDCWD, argv[i], RENAME_EXCHANGE) == 0) swaps++;
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= ms) break;
  }
  printf("%ld\\n", swaps);
  return 0;
}
`;

const NODE_FALLBACK = `
const { renameSync } = require("node:fs");
const [ms, name, ...links] = [Number(process.argv[1]), process.argv[2], ...process.argv.slice(3)];
const end = Date.now() + ms;
let swaps = 0;
while (Date.now() < end) for (const link of links) {
  try { renameSync(name, name + ".real"); renameSync(link, name); renameSync(name, link); renameSync(name + ".real", name); swaps += 2; } catch {}
}
console.log(swaps);
`;

let compiled: string | null | undefined;
function binary(): string | undefined {
  if (compiled !== undefined) return compiled ?? undefined;
  const dir = tempDir("sandbox-kit-swapper-");
  try {
    writeFileSync(join(dir, "swap.c"), SOURCE);
    execFileSync(process.env.CC || "cc", ["-O2", "-o", join(dir, "swap"), join(dir, "swap.c")], { stdio: "ignore" });
    compiled = join(dir, "swap");
  } catch {
    compiled = null;
  }
  return compiled ?? undefined;
}

export interface ExchangeSwapper {
  /** The swapper's pid (a real process, checked by it). */
  pid: number;
  /** "renameat2" or "rename" (no compiler). */
  kind: string;
  readonly running: boolean;
  /** Resolves with the number of swaps done. */
  done: Promise<number>;
}

export function startExchangeSwapper(cwd: string, name: string, links: string[], ms: number): ExchangeSwapper {
  const bin = binary();
  const child = bin
    ? spawn(bin, [String(ms), name, ...links], { cwd, stdio: ["ignore", "pipe", "ignore"] })
    : spawn(process.execPath, ["-e", NODE_FALLBACK, String(ms), name, ...links], { cwd, stdio: ["ignore", "pipe", "ignore"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  let running = true;
  const done = new Promise<number>((resolve) =>
    child.on("exit", () => {
      running = false;
      resolve(Number(out.trim()) || 0);
    }),
  );
  return {
    pid: child.pid!,
    kind: bin ? "renameat2" : "rename",
    done,
    get running() {
      return running;
    },
  };
}
