import { readFileSync } from "node:fs";

/**
 * uid/gid → name from /etc/passwd and /etc/group, read once; the numeric id
 * when there is no entry (as `ls -l` does).
 */
export class OwnerNames {
  #users?: Map<number, string>;
  #groups?: Map<number, string>;

  user(uid: number): string {
    this.#users ??= readIdFile("/etc/passwd");
    return this.#users.get(uid) ?? String(uid);
  }

  group(gid: number): string {
    this.#groups ??= readIdFile("/etc/group");
    return this.#groups.get(gid) ?? String(gid);
  }
}

function readIdFile(file: string): Map<number, string> {
  const map = new Map<number, string>();
  try {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const [name, , id] = line.split(":");
      if (name && id && /^\d+$/.test(id) && !map.has(Number(id))) map.set(Number(id), name);
    }
  } catch {
    // no such file in this container: numeric ids it is
  }
  return map;
}
