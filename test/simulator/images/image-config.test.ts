import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { parseLdd } from "../../../simulator/launcher/sandbox-kit.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { writeOciLayout, type TestEntry } from "./tar-writer.js";

/**
 * An image's own configuration (its OCI config's Env, WorkingDir and User)
 * applies to what runs in a sandbox made from it, under the default
 * (isolating) launcher: commands run under the image's SHELL (bash here,
 * where the agent's default is /bin/sh), start in its WorkingDir, see its Env
 * beneath the sandbox's own envs, and run as its User — or, where the sandbox
 * has only its root id, as root with an event saying why. The image is made
 * here (the host's bash, sh and coreutils with their libraries, imported as
 * an OCI layout): no network, no hub build.
 */
type Sdk = typeof import("@blaxel/core");
const WS = "image-config";
const KEY = "image-config-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;

const PASSWD = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/bash\n";
const GROUP = "root:x:0:\napp:x:1000:\ntools:x:1500:app\n";

/** The host's programs the image holds, with the libraries and loader each needs. */
function shellImageFiles(): TestEntry[] {
  const programs = ["/bin/bash", "/bin/sh", "/usr/bin/id", "/usr/bin/env", "/bin/cat"].map((b) => realpathSync(b));
  const files = new Map<string, string>();
  for (const program of programs) {
    files.set(program, program);
    const { libs, loader } = parseLdd(execFileSync("ldd", [program], { encoding: "utf8" }));
    for (const path of [...libs.values(), ...(loader ? [loader] : [])]) files.set(path, realpathSync(path));
  }
  const entries: TestEntry[] = [...files].map(([inImage, host]) => ({ name: inImage.slice(1), content: readFileSync(host), mode: 0o755 }));
  for (const link of ["/bin/bash", "/bin/sh", "/usr/bin/id", "/usr/bin/env", "/bin/cat"]) {
    if (realpathSync(link) !== link) entries.push({ name: link.slice(1), type: "symlink", link: realpathSync(link) });
  }
  entries.push({ name: "etc/passwd", content: PASSWD });
  entries.push({ name: "etc/group", content: GROUP });
  entries.push({ name: "home/app", type: "dir" });
  return entries;
}

async function importImage(store: ImageStore, name: string, config: Record<string, unknown>): Promise<void> {
  const layout = join(trackedTempDir("image-config-layout-"), "oci");
  writeOciLayout(layout, [shellImageFiles()], { config });
  await store.import(layout, name);
}

beforeAll(async () => {
  if (isolationUnavailable) return;
  const cache = trackedTempDir("image-config-");
  const store = new ImageStore({ dir: cache, docker: null });
  const env = ["PATH=/usr/local/bin:/usr/bin:/bin", "SHELL=/bin/bash", "FROM_IMAGE=tiny", "OVERRIDDEN=by-the-image"];
  await importImage(store, "bash-app:v1", { Env: env, WorkingDir: "/srv/app", User: "app" });
  await importImage(store, "bash-root:v1", { Env: env, WorkingDir: "/srv/app" });
  await importImage(store, "no-such-user:v1", { Env: env, User: "ghost" });
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageCache: cache });
  sdk = await sdkForSimulator(sim.env);
}, 120_000);
afterAll(async () => {
  await sim?.stop();
});

describe.skipIf(isolationUnavailable !== undefined)("an image's Env, WorkingDir and User apply to its sandboxes", () => {
  it("commands run under the image's SHELL, in its WorkingDir, with its Env beneath the sandbox's envs", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "bash-root", image: "bash-root:v1", envs: [{ name: "OVERRIDDEN", value: "by-the-sandbox" }] });
    const run = async (command: string, workingDir?: string) => (await sandbox.process.exec({ command, workingDir, waitForCompletion: true })).logs ?? "";
    // A bash function definition: /bin/sh (dash, or bash as sh) would not take `function f()` with this meaning everywhere.
    expect(await run("function f() { echo hi; }; f")).toBe("hi\n");
    expect(await run("echo ${BASH_VERSION:+bash}")).toBe("bash\n");
    expect(await run("echo $PWD")).toBe("/srv/app\n");
    expect(await run("echo $PWD", "/")).toBe("/\n");
    expect(await run("echo $FROM_IMAGE $OVERRIDDEN")).toBe("tiny by-the-sandbox\n");
    expect(await run("id -u")).toBe("0\n");
    await sdk.SandboxInstance.delete("bash-root");
  }, 120_000);

  it("commands run as the image's User, with its home; where the sandbox has one id only, as root and an event says why", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "bash-app", image: "bash-app:v1" });
    const run = async (command: string) => (await sandbox.process.exec({ command, waitForCompletion: true })).logs ?? "";
    expect(await run("echo $HOME $PWD")).toBe("/home/app /srv/app\n");
    // The sandbox's own id map says whether uid 1000 can exist in it (one line "0 <host id> 1": root alone).
    const idMap = (await run("cat /proc/self/uid_map")).trim().split("\n");
    const singleId = idMap.length === 1 && /\s1$/.test(idMap[0]!);
    const events = (await sdk.SandboxInstance.get("bash-app")).events ?? [];
    const notice = events.map((e) => e.message ?? "").find((m) => m.includes(`User "app"`));
    if (singleId) {
      expect(await run("id -u")).toBe("0\n");
      expect(notice).toContain("is not applied");
    } else {
      expect(await run("id -u; id -g; id -G")).toBe("1000\n1000\n1000 1500\n");
      expect(notice).toBeUndefined();
    }
    await sdk.SandboxInstance.delete("bash-app");
  }, 120_000);

  it("a User the image's passwd does not know fails the sandbox with the runtime's reason", async () => {
    await expect(sdk.SandboxInstance.create({ name: "ghost", image: "no-such-user:v1" })).rejects.toThrow();
    const failed = await sdk.SandboxInstance.get("ghost");
    expect(failed.status).toBe("FAILED");
    expect((failed.events ?? []).map((e) => e.message).join("\n")).toContain("unable to find user ghost: no matching entries in passwd file");
    await sdk.SandboxInstance.delete("ghost");
  }, 120_000);
});
