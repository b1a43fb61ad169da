import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { ImageStore } from "../../simulator/images/image-store.js";
import { parseLdd } from "../../simulator/launcher/sandbox-kit.js";
import { writeOciLayout, type TestEntry } from "../simulator/images/tar-writer.js";
import { trackedTempDir } from "./temp-dirs.js";

/**
 * A small image made of the host's own programs (each found on PATH, with the
 * shared libraries ldd names) and the files given: nothing else, so a test
 * knows exactly what the image lacks (mount, setpriv, bash...). Imported as
 * an OCI layout into a fresh image store: no network, no hub build.
 */
export function hostProgramsImage(programs: readonly string[], extra: readonly TestEntry[] = []): TestEntry[] {
  const files = new Map<string, string>(); // path in the image -> host file
  const links: TestEntry[] = [];
  for (const program of programs) {
    const found = execFileSync("sh", ["-c", `command -v ${program}`], { encoding: "utf8" }).trim();
    const real = realpathSync(found);
    files.set(real, real);
    // Reached by its usual name too (/bin/sh -> /usr/bin/dash).
    if (found !== real) links.push({ name: found.slice(1), type: "symlink", link: real });
    const { libs, loader } = parseLdd(execFileSync("ldd", [real], { encoding: "utf8" }).toString());
    for (const path of [...libs.values(), ...(loader ? [loader] : [])]) files.set(path, realpathSync(path));
  }
  const entries: TestEntry[] = [...files].map(([inImage, host]) => ({ name: inImage.slice(1), content: readFileSync(host), mode: 0o755 }));
  // Debian's usrmerge: /bin and /lib are /usr's (ldd names /lib/x86_64-linux-gnu/...).
  for (const dir of ["bin", "sbin", "lib"])
    if (!entries.some((e) => e.name.startsWith(`${dir}/`))) entries.push({ name: dir, type: "symlink", link: `usr/${dir}` });
  if (existsSync("/lib64") && !entries.some((e) => e.name.startsWith("lib64/"))) entries.push({ name: "lib64", type: "symlink", link: "usr/lib64" });
  return [...entries, ...links.filter((l) => !files.has(`/${l.name}`)), { name: "tmp", type: "dir", mode: 0o777 }, ...extra];
}

/** A fresh store holding `entries` as image `name`. */
export async function storeWithImage(
  name: string,
  entries: TestEntry[],
  env: string[] = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
): Promise<{ cache: string; store: ImageStore }> {
  const cache = trackedTempDir("host-programs-images-");
  const store = new ImageStore({ dir: cache, docker: null });
  const layout = join(trackedTempDir("host-programs-layout-"), "oci");
  writeOciLayout(layout, [entries], { config: { Env: env, WorkingDir: "/" } });
  await store.import(layout, name);
  return { cache, store };
}
