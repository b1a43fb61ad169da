import { lstatSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * An image's User (Docker's `USER`, the OCI config's `User`) resolved the way
 * a container runtime resolves it (runc's GetExecUser), inside the image's
 * own /etc/passwd and /etc/group: `name`, `uid`, `name:group`, `uid:gid`
 * (either side a name or a number). A number with no passwd entry is used as
 * is (group 0, home `/`); a name with none is an error. Without an explicit
 * group, the user's supplementary groups are those of /etc/group that list
 * its name.
 */

export interface ImageUser {
  /** The User as the image wrote it. */
  spec: string;
  uid: number;
  gid: number;
  /** Supplementary group ids. */
  groups: number[];
  /** The passwd entry's home directory (`/` without one): HOME when the image's Env sets none. */
  home: string;
}

export class ImageUserError extends Error {}

interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
}
interface GroupEntry {
  name: string;
  gid: number;
  members: string[];
}

const NUMERIC = /^\d+$/;

export function parsePasswd(text: string): PasswdEntry[] {
  return text.split("\n").flatMap((line) => {
    const [name, , uid, gid, , home] = line.split(":");
    if (!name || line.startsWith("#") || !NUMERIC.test(uid ?? "") || !NUMERIC.test(gid ?? "")) return [];
    return [{ name, uid: Number(uid), gid: Number(gid), home: home || "/" }];
  });
}

export function parseGroup(text: string): GroupEntry[] {
  return text.split("\n").flatMap((line) => {
    const [name, , gid, members] = line.split(":");
    if (!name || line.startsWith("#") || !NUMERIC.test(gid ?? "")) return [];
    return [
      {
        name,
        gid: Number(gid),
        members: (members ?? "")
          .split(",")
          .map((m) => m.trim())
          .filter(Boolean),
      },
    ];
  });
}

/** Resolves `spec` against passwd and group file contents (empty when the image has none). */
export function resolveUser(spec: string, passwdText: string, groupText: string): ImageUser {
  const [userPart = "", groupPart, ...extra] = spec.trim().split(":");
  if (userPart === "" || extra.length > 0) throw new ImageUserError(`invalid User "${spec}": expected name, uid, name:group or uid:gid`);
  const passwd = parsePasswd(passwdText);
  const groups = parseGroup(groupText);
  const entry = NUMERIC.test(userPart) ? passwd.find((p) => p.uid === Number(userPart)) : passwd.find((p) => p.name === userPart);
  if (!entry && !NUMERIC.test(userPart)) throw new ImageUserError(`unable to find user ${userPart}: no matching entries in passwd file`);
  const uid = entry?.uid ?? Number(userPart);
  let gid = entry?.gid ?? 0;
  let supplementary: number[] = [];
  if (groupPart !== undefined && groupPart !== "") {
    const group = NUMERIC.test(groupPart) ? { gid: Number(groupPart) } : groups.find((g) => g.name === groupPart);
    if (!group) throw new ImageUserError(`unable to find group ${groupPart}: no matching entries in group file`);
    gid = group.gid;
  } else if (entry) {
    supplementary = [...new Set(groups.filter((g) => g.members.includes(entry.name)).map((g) => g.gid))].filter((g) => g !== gid);
  }
  return { spec, uid, gid, groups: supplementary, home: entry?.home ?? "/" };
}

/** True for a user that is root with no other group: nothing to switch to. */
export function isRoot(user: ImageUser): boolean {
  return user.uid === 0 && user.gid === 0 && user.groups.length === 0;
}

/**
 * Resolves an image's User in its root filesystem; `layers` are the root
 * directories to look in, top first (a sandbox's own writable layer, then the
 * image's), the first that holds a file wins, and an overlay whiteout (a
 * character device 0/0: the file deleted in that layer) means there is none.
 * Undefined for no User at all.
 */
export function resolveImageUser(spec: string, layers: string[]): ImageUser | undefined {
  if (!spec.trim()) return undefined;
  const read = (file: string) => {
    for (const layer of layers) {
      // A real etc/ and a regular file only: a symbolic link in an image would be followed on the host.
      if (!lstatSync(join(layer, "etc"), { throwIfNoEntry: false })?.isDirectory()) continue;
      const path = join(layer, "etc", file);
      const st = lstatSync(path, { throwIfNoEntry: false });
      if (st?.isFile()) return readFileSync(path, "utf8");
      if (st?.isCharacterDevice() && st.rdev === 0) return "";
    }
    return "";
  };
  return resolveUser(spec, read("passwd"), read("group"));
}
