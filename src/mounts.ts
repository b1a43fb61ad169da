import { readFileSync } from "node:fs";

/** Mount points at or under `dir` (/proc/self/mountinfo field 5); none where there is no procfs. */
export function mountsUnder(dir: string): string[] {
  let text: string;
  try {
    text = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .map((l) => (l.split(" ")[4] ?? "").replace(/\\040/g, " "))
    .filter((m) => m === dir || m.startsWith(`${dir}/`));
}
