import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { hostProgramsImage, storeWithImage } from "../../helpers/host-programs-image.js";
import { singleIdReason } from "../../helpers/id-ranges.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * The agent brings its own tools: drives are bind-mounted with the kit's
 * util-linux mount/umount and commands start through the kit's setpriv, so a
 * sandbox over an image that has none of them (no mount, umount, setpriv or
 * bash: like distroless and other minimal images, and the hub images' slim
 * bases) still mounts, lists and unmounts drives through @blaxel/core, under
 * the default (bwrap) launcher, as root and as a normal user.
 * (npm run build first: the agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
const WS = "own-tools";
const KEY = "own-tools-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;

beforeAll(async () => {
  if (isolationUnavailable) return;
  // A shell, cat, ls, touch and their libraries: nothing a drive or a privilege drop could be done with.
  const { cache } = await storeWithImage(
    "bare-shell:v1",
    hostProgramsImage(["sh", "cat", "ls", "touch", "mkdir"], [{ name: "etc/os-release", content: "ID=bare\n" }]),
  );
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageCache: cache });
  sdk = await sdkForSimulator(sim.env);
}, 120_000);
const single = singleIdReason();

afterAll(async () => {
  await sim?.stop();
});

describe.skipIf(isolationUnavailable !== undefined)("drives in a sandbox whose image has no mount, umount, setpriv or bash", () => {
  it("mounts (read-write and read-only), lists and unmounts drives through sandbox.drives", async () => {
    await sdk.DriveInstance.create({ name: "bare-drive" });
    const sandbox = await sdk.SandboxInstance.create({ name: "bare", image: "bare-shell:v1" });
    const run = async (command: string) => (await sandbox.process.exec({ command, waitForCompletion: true })).logs ?? "";
    // What the image lacks (the kit's copies are not on its PATH).
    expect(await run("for p in mount umount setpriv bash; do command -v $p || echo no-$p; done")).toBe("no-mount\nno-umount\nno-setpriv\nno-bash\n");

    await sandbox.drives.mount({ driveName: "bare-drive", mountPath: "/mnt/rw" });
    await sandbox.drives.mount({ driveName: "bare-drive", mountPath: "/mnt/ro", readOnly: true });
    const listed = await sandbox.drives.list();
    expect(listed.map((d) => [d.driveName, d.mountPath, d.readOnly]).sort()).toEqual([
      ["bare-drive", "/mnt/ro", true],
      ["bare-drive", "/mnt/rw", false],
    ]);

    // Real kernel mounts: what one path writes the other shows; the read-only one refuses writes.
    expect(await run("echo from-rw > /mnt/rw/f.txt; cat /mnt/ro/f.txt; touch /mnt/ro/g 2>/dev/null && echo ro-writable || echo ro-refused")).toBe(
      "from-rw\nro-refused\n",
    );
    expect(readFileSync(join(sim.agents.drivesDir(WS), "bare-drive", "f.txt"), "utf8")).toBe("from-rw\n");

    await sandbox.drives.unmount("/mnt/ro");
    await sandbox.drives.unmount("/mnt/rw");
    expect(await sandbox.drives.list()).toEqual([]);
    // Unmounted for real (the mount points the agent made are removed with them).
    expect(await run("cat /mnt/rw/f.txt /mnt/ro/f.txt 2>/dev/null || echo unmounted")).toBe("unmounted\n");
    expect(await run("cat /proc/self/mountinfo")).not.toMatch(/ \/mnt\/r[ow] /);
    expect(existsSync(join(sim.agents.drivesDir(WS), "bare-drive", "f.txt"))).toBe(true); // the drive keeps its files
    await sdk.SandboxInstance.delete("bare");
  }, 120_000);
});

describe.skipIf(single !== undefined)(
  `another user's command with the kit's setpriv, in an image without su, runuser or setpriv${single ? ` (skipped: ${single})` : ""}`,
  () => {
    it("runs as that uid", async () => {
      const sandbox = await sdk.SandboxInstance.create({ name: "bare-user", image: "bare-shell:v1" });
      const kitSetpriv =
        'L=$(ls /opt/sandbox-kit/lib/ld-*.so*) && "$L" --library-path /opt/sandbox-kit/lib /opt/sandbox-kit/bin/setpriv --reuid=1234 --regid=1234 --clear-groups';
      const r = await sandbox.process.exec({ command: `${kitSetpriv} touch /tmp/by-1234 && ls -ln /tmp/by-1234`, waitForCompletion: true });
      expect(r.logs).toMatch(/^-\S+ 1 1234 1234 0 .* \/tmp\/by-1234\n$/);
      await sdk.SandboxInstance.delete("bare-user");
    }, 120_000);
  },
);
