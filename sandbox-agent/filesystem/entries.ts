import { promises as fsp, type Stats } from "node:fs";
import { join, posix } from "node:path";
import { formatPermissions } from "./permissions.js";
import type { OwnerNames } from "./owners.js";

/** The `File` shape of the reference daemon and @blaxel/core's types. */
export interface FileEntry {
  path: string;
  name: string;
  permissions: string;
  size: number;
  lastModified: string;
  owner: string;
  group: string;
}

export interface DirectoryEntry {
  path: string;
  name: string;
  files: FileEntry[];
  subdirectories: { path: string; name: string }[];
}

export function fileEntry(sandboxPath: string, stat: Stats, owners: OwnerNames): FileEntry {
  return {
    path: sandboxPath,
    name: posix.basename(sandboxPath),
    permissions: formatPermissions(stat.mode),
    size: stat.size,
    lastModified: stat.mtime.toISOString(),
    owner: owners.user(stat.uid),
    group: owners.group(stat.gid),
  };
}

/**
 * Lists a directory with lstat, so a symlink is listed as itself (a file
 * entry) and never followed out of the sandbox.
 */
export async function listDirectory(sandboxPath: string, hostPath: string, owners: OwnerNames): Promise<DirectoryEntry> {
  const names = (await fsp.readdir(hostPath)).sort();
  const files: FileEntry[] = [];
  const subdirectories: { path: string; name: string }[] = [];
  await Promise.all(
    names.map(async (name) => {
      const stat = await fsp.lstat(join(hostPath, name)).catch(() => undefined);
      if (!stat) return; // deleted while we listed
      const path = posix.join(sandboxPath, name);
      if (stat.isDirectory()) subdirectories.push({ path, name });
      else files.push(fileEntry(path, stat, owners));
    }),
  );
  files.sort((a, b) => a.name.localeCompare(b.name));
  subdirectories.sort((a, b) => a.name.localeCompare(b.name));
  return { path: sandboxPath, name: posix.basename(sandboxPath) || "/", files, subdirectories };
}
