import { spawn } from "node:child_process";

/** A name the swapper toggles: `dir` is in turn the real directory, nothing, the link, nothing. */
export interface SwapPair {
  dir: string;
  real: string;
  link: string;
}

const SCRIPT = `
const { renameSync } = require("node:fs");
const [pairs, ms] = [JSON.parse(process.argv[1]), Number(process.argv[2])];
const end = Date.now() + ms;
for (let sweep = 0; Date.now() < end; sweep++) {
  pairs.forEach(({ dir, real, link }, k) => {
    try { [() => renameSync(real, dir), () => renameSync(dir, real), () => renameSync(link, dir), () => renameSync(dir, link)][(sweep + k) % 4](); } catch {}
  });
}
`;

/**
 * A process of the sandbox attacking the agent: for `ms`, it
 * renames each pair's real directory and link in and out of `dir`, as fast as
 * it can, pair k a step ahead of pair k-1 (so with several pairs, a quarter
 * of the names are real directories and a quarter links at any moment).
 */
export function startSwapper(pairs: SwapPair[], ms: number): { done: Promise<void>; readonly running: boolean } {
  const child = spawn(process.execPath, ["-e", SCRIPT, JSON.stringify(pairs), String(ms)], { stdio: "ignore" });
  let running = true;
  const done = new Promise<void>((resolve) => child.on("exit", () => resolve())).then(() => {
    running = false;
  });
  return {
    done,
    get running() {
      return running;
    },
  };
}
