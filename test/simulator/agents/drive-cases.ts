import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * Drives over real agents with @blaxel/core: a drive resource is a directory
 * in the simulator's drives dir, sandbox.drives.mount attaches it through the
 * sandbox's agent, and sandboxes mounting the same drive share its files.
 * (npm run build first: the agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
const KEY = "drives-agents-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;

async function api(method: string, path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}${path}`, { method, headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "drives-ws" } });
  return { status: res.status, body: await res.json() };
}

/**
 * The cases, under one way of serving sandboxes' agents (drives.test.ts: the default, the agent host, which mounts
 * in the sandbox's namespace from outside; drives-process.test.ts: an agent in each sandbox). One file each: the
 * SDK keeps the first simulator it is pointed at.
 */
export function driveCases(agentMode: "auto" | "process"): void {
  describe(`drives shared between sandboxes through their agents (--agent-mode ${agentMode})`, () => {
    beforeAll(async () => {
      sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: "drives-ws", logLevel: "silent", agentMode });
      sdk = await sdkForSimulator(sim.env);
    });
    afterAll(async () => {
      await sim?.stop();
    });

    it("two sandboxes that mount the same drive see each other's files; the drive is a directory of the simulator", async () => {
      const drive = await sdk.DriveInstance.create({ name: "team" });
      const dir = join(sim.agents.drivesDir("drives-ws"), "team");
      expect(drive.name).toBe("team");
      expect(existsSync(dir)).toBe(true);

      const one = await sdk.SandboxInstance.create({ name: "one" });
      const two = await sdk.SandboxInstance.create({ name: "two" });
      await one.drives.mount({ driveName: "team", mountPath: "/mnt/team" });
      await two.drives.mount({ driveName: "team", mountPath: "/data/shared" });
      await one.fs.write("/mnt/team/from-one.txt", "written by one");
      expect(await two.fs.read("/data/shared/from-one.txt")).toBe("written by one");
      await two.fs.write("/data/shared/from-two.txt", "written by two");
      expect(await one.fs.read("/mnt/team/from-two.txt")).toBe("written by two");
      expect(readFileSync(join(dir, "from-two.txt"), "utf8")).toBe("written by two");

      // Deleting a drive that is mounted: 409 naming who mounts it; the files stay.
      const refused = await api("DELETE", "/v0/drives/team");
      expect(refused.status).toBe(409);
      expect(refused.body.message).toMatch(/sandbox "one" at \/mnt\/team/);
      expect(refused.body.message).toMatch(/sandbox "two" at \/data\/shared/);
      expect(existsSync(join(dir, "from-one.txt"))).toBe(true);

      await one.drives.unmount("/mnt/team");
      await two.drives.unmount("/data/shared");
      expect((await api("DELETE", "/v0/drives/team")).status).toBe(200);
      expect(existsSync(dir)).toBe(false);
      expect((await api("GET", "/v0/drives/team")).status).toBe(404);
    });

    it("mounting a drive that is not a control-plane resource fails clearly, and mounts nothing", async () => {
      const sandbox = await sdk.SandboxInstance.create({ name: "three" });
      await expect(sandbox.drives.mount({ driveName: "ghost", mountPath: "/mnt/ghost" })).rejects.toThrow(/drive "ghost" does not exist/);
      expect(await sandbox.drives.list()).toEqual([]);
      expect(existsSync(join(sim.agents.drivesDir("drives-ws"), "ghost"))).toBe(false);
    });

    it('a drive\'s permissions: a sandbox whose labels match none is refused the mount with "permission denied"; a matching one mounts', async () => {
      await sdk.DriveInstance.create({ name: "vault", permissions: [{ labels: { team: "secret" }, mode: "read-write" }] });
      const other = await sdk.SandboxInstance.create({ name: "acl-other", labels: { team: "other" } });
      const refused = await other.drives.mount({ driveName: "vault", mountPath: "/mnt/acl" }).then(
        () => "mounted",
        (err: Error) => err.message,
      );
      expect(refused).toMatch(/permission denied/);
      expect(await other.drives.list()).toEqual([]);
      const secret = await sdk.SandboxInstance.create({ name: "acl-secret", labels: { team: "secret" } });
      await secret.drives.mount({ driveName: "vault", mountPath: "/mnt/acl" });
      const write = await secret.process.exec({ command: "echo acl-write-ok > /mnt/acl/t.txt && cat /mnt/acl/t.txt", waitForCompletion: true });
      expect(write.logs).toContain("acl-write-ok");
    });
  });
}
