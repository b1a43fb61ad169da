import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { hostProgramsImage, storeWithImage } from "../../helpers/host-programs-image.js";
import { singleIdReason } from "../../helpers/id-ranges.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { eventually } from "../launcher/helpers.js";

/**
 * Every user id in a sandbox (default launcher, real SDK): chown to another
 * id, a tar archive of uid 1000 extracted with its owners, useradd and then a
 * command as that user — as root (the simulator's own block of /etc/subuid)
 * and as a normal user where it has subordinate ids; without any, a single id
 * and /health saying why. The image holds only the host programs the commands
 * use (useradd, setpriv, tar...), no bash.
 * (npm run build first: the agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
const WS = "user-ids";
const KEY = "user-ids-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;
let mapped: { all: boolean; detail: string } | undefined;

const IMAGE_ETC = [
  { name: "etc/passwd", content: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
  { name: "etc/group", content: "root:x:0:\nnogroup:x:65534:\n" },
  { name: "etc/shadow", content: "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n", mode: 0o640 },
  { name: "etc/gshadow", content: "root:*::\nnogroup:*::\n", mode: 0o640 },
  { name: "etc/login.defs", content: "UID_MIN 1000\nUID_MAX 60000\nGID_MIN 1000\nGID_MAX 60000\nUSERGROUPS_ENAB yes\n" },
  { name: "root", type: "dir" as const, mode: 0o700 },
  { name: "home", type: "dir" as const },
];

beforeAll(async () => {
  if (isolationUnavailable) return;
  const programs = ["sh", "cat", "ls", "id", "touch", "mkdir", "chown", "chmod", "rm", "stat", "tar", "useradd", "setpriv"];
  const { cache } = await storeWithImage("ids-shell:v1", hostProgramsImage(programs, IMAGE_ETC));
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageCache: cache, sandboxRetentionMs: 0 });
  sdk = await sdkForSimulator(sim.env);
  mapped = ((await (await fetch(`${sim.url}/health`)).json()) as { sandboxes: { userIds?: { all: boolean; detail: string } } }).sandboxes.userIds;
}, 120_000);
afterAll(async () => {
  await sim?.stop();
});

const single = singleIdReason();
if (single) console.warn(`user-id tests skipped: ${single}`);

describe.skipIf(isolationUnavailable !== undefined)("/health says which user ids sandboxes get", () => {
  it("all of them, or one and why", () => {
    expect(mapped?.all).toBe(single === undefined);
    expect(mapped?.detail).toMatch(single === undefined ? /^user ids 0-65536 / : /^one user id only/);
  });
});

describe.skipIf(single !== undefined)(`every user id in a sandbox${single ? ` (skipped: ${single})` : ""}`, () => {
  it("chown 1000:1000, tar -xpf of a uid-1000 archive, useradd then a command as that user", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "ids", image: "ids-shell:v1" });
    const run = async (command: string) => {
      const r = await sandbox.process.exec({ command, waitForCompletion: true });
      return { out: r.logs ?? "", code: r.exitCode };
    };
    expect((await run("command -v bash || echo no-bash")).out).toBe("no-bash\n");

    // chown to ids other than root's: EINVAL with a single id.
    expect(await run("touch /tmp/f && chown 1000:1000 /tmp/f && stat -c '%u:%g' /tmp/f")).toEqual({ out: "1000:1000\n", code: 0 });

    // An archive whose entries belong to uid 1000 extracts with its owners (tar exited 2 before).
    const made = await run(
      "mkdir -p /tmp/src && echo data > /tmp/src/owned.txt && tar --owner=1000 --group=1000 -C /tmp/src -cf /tmp/owned.tar owned.txt && mkdir -p /tmp/out && tar -xpf /tmp/owned.tar -C /tmp/out && stat -c '%u:%g' /tmp/out/owned.txt",
    );
    expect(made).toEqual({ out: "1000:1000\n", code: 0 });

    // useradd, then a command run as that user through the image's setpriv.
    expect((await run("useradd --create-home --uid 1234 alice 2>&1; echo rc=$?")).out).toBe("rc=0\n");
    expect((await run("stat -c '%u:%g %U' /home/alice")).out).toBe("1234:1234 alice\n");
    expect(
      (
        await run(
          "setpriv --reuid=alice --regid=alice --init-groups id -u; setpriv --reuid=alice --regid=alice --init-groups touch /home/alice/mine && stat -c %u /home/alice/mine",
        )
      ).out,
    ).toBe("1234\n1234\n");
    // A user cannot write root's files: the ids are really distinct.
    expect((await run("setpriv --reuid=alice --regid=alice --init-groups touch /root/x 2>/dev/null && echo wrote || echo refused")).out).toBe("refused\n");

    // On the host: the sandbox's uid 1000 is an id of the simulator's subordinate block, not the host's uid 1000.
    const upper = join(sim.agents.sandboxDir(WS, "ids"), "root", "tmp", "out", "owned.txt");
    const start = Number(/host ids (\d+)-/.exec(mapped!.detail)![1]);
    expect(statSync(upper).uid).toBe(start + 999);
    await sdk.SandboxInstance.delete("ids");
    // Its files are gone, those of its other users too (as a normal user they are removed inside the mapping).
    const retired = join(sim.agents.dir, "retired", WS);
    await eventually(() => !existsSync(sim.agents.sandboxDir(WS, "ids")) && (!existsSync(retired) || !readdirSync(retired).some((e) => e.startsWith("ids@"))));
  }, 120_000);

  it("a snapshot keeps owners and deletions of image files: the fork and the restored sandbox have them", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "ids-snap", image: "ids-shell:v1" });
    const run = async (box: typeof sandbox, command: string) => (await box.process.exec({ command, waitForCompletion: true })).logs ?? "";
    // A file of uid 1000, one of 1234 in a directory of its own, and an image file deleted (an overlay whiteout in the sandbox's layer).
    expect(
      await run(
        sandbox,
        "mkdir -p /srv/data && touch /srv/data/a && chown 1000:1000 /srv/data/a && mkdir /srv/data/b && touch /srv/data/b/c && chown -R 1234:1234 /srv/data/b && chmod 700 /srv/data/b && rm /etc/login.defs && echo ok",
      ),
    ).toBe("ok\n");
    const facts = "stat -c '%n %u:%g %a' /srv/data/a /srv/data/b /srv/data/b/c; cat /etc/login.defs 2>/dev/null || echo login.defs-gone";
    const expected = "/srv/data/a 1000:1000 644\n/srv/data/b 1234:1234 700\n/srv/data/b/c 1234:1234 644\nlogin.defs-gone\n";
    expect(await run(sandbox, facts)).toBe(expected);
    const snapshot = await sandbox.snapshots.create("ids-snap-1");
    expect(snapshot.status).toBe("ready");

    await snapshot.fork("ids-snap-fork");
    const fork = await sdk.SandboxInstance.get("ids-snap-fork");
    expect(await run(fork, facts)).toBe(expected);

    await run(sandbox, "rm -rf /srv/data; echo back > /etc/login.defs");
    await sandbox.snapshots.restore("ids-snap-1");
    expect(await run(await sdk.SandboxInstance.get("ids-snap"), facts)).toBe(expected);

    await sdk.Snapshot.delete(snapshot.id);
    await sdk.SandboxInstance.delete("ids-snap-fork");
    await sdk.SandboxInstance.delete("ids-snap");
  }, 120_000);
});
