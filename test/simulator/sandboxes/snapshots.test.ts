import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * A snapshot keeps the sandbox's root files (in the simulator's data
 * dir); fork and restore copy them back in; delete removes them. Through
 * HTTP and through @blaxel/core. (npm run build first: the agents run from dist/.)
 */
const KEY = "snapshots-admin-key";
const WS = "snaps";
type Sdk = typeof import("@blaxel/core");
let sim: ServedSimulator;
let sdk: Sdk;
beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: WS, logLevel: "silent" });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

const auth = (r: request.Test) => r.set("authorization", `Bearer ${KEY}`).set("x-blaxel-workspace", WS);
const post = (path: string, body: unknown = {}) => auth(request(sim.url).post(path)).send(body as object);

/** Runs a shell command in the sandbox through the proxy (its cwd is the sandbox's root). */
async function sh(sandbox: string, command: string): Promise<string> {
  const res = await post(`/sbx/${WS}/${sandbox}/process`, { command, waitForCompletion: true }).expect(200);
  return String(res.body.stdout ?? res.body.logs ?? "").trim();
}

describe("snapshots keep the sandbox's files", () => {
  it("through HTTP: snapshot copies the root, fork and restore copy it back, delete removes it", async () => {
    await post("/v0/sandboxes", { metadata: { name: "snap-src" } }).expect(200);
    await sh("snap-src", "mkdir -p d && echo one > d/a.txt");
    const snap = await post("/v0/snapshots", { name: "s1", source: { name: "snap-src", kind: "sandbox" } }).expect(200);
    expect(snap.body).toMatchObject({ name: "s1", status: "ready", sandboxName: "snap-src" });
    const files = sim.agents.snapshots.dirOf(WS, snap.body.id);
    expect(readFileSync(join(files, "d", "a.txt"), "utf8")).toBe("one\n");

    // The source moves on after the snapshot.
    await sh("snap-src", "echo two > d/a.txt && echo later > b.txt");

    const forked = await post("/v0/snapshots/s1/fork", { targetName: "from-s1", targetType: "sandbox" }).expect(200);
    expect(forked.body).toEqual({ name: "from-s1", snapshotId: snap.body.id, type: "sandbox" });
    expect(await sh("from-s1", "cat d/a.txt")).toBe("one");
    expect(await sh("from-s1", "test -e b.txt && echo yes || echo no")).toBe("no");

    const restored = await post(`/v0/sandboxes/snap-src/snapshots/${snap.body.id}/restore`).expect(200);
    expect(restored.body).toEqual({ name: "snap-src", snapshotId: snap.body.id });
    expect(await sh("snap-src", "cat d/a.txt")).toBe("one");
    expect(await sh("snap-src", "test -e b.txt && echo yes || echo no")).toBe("no");
    const got = await auth(request(sim.url).get("/v0/sandboxes/snap-src")).expect(200);
    expect(got.body.status).toBe("DEPLOYED");
    expect(got.body.events.map((e: { message: string }) => e.message)).toContain(`restoring snapshot ${snap.body.id}: stopping the sandbox agent`);

    await auth(request(sim.url).delete("/v0/snapshots/s1")).expect(204);
    expect(existsSync(files)).toBe(false);
    await post(`/v0/sandboxes/snap-src/snapshots/${snap.body.id}/restore`).expect(404);
  });

  it("through @blaxel/core: sandbox.snapshots.create, Snapshot.fork, snapshots.restore, Snapshot.delete", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "sdk-snap-src" });
    await sandbox.fs.write("/notes/plan.txt", "version 1");
    const snapshot = await sandbox.snapshots.create("sdk-snap");
    expect(snapshot.status).toBe("ready");
    await sandbox.fs.write("/notes/plan.txt", "version 2");

    await snapshot.fork("sdk-snap-fork");
    const fork = await sdk.SandboxInstance.get("sdk-snap-fork");
    expect(await fork.fs.read("/notes/plan.txt")).toBe("version 1");

    await sandbox.snapshots.restore("sdk-snap");
    expect(await sandbox.fs.read("/notes/plan.txt")).toBe("version 1");

    await sdk.Snapshot.delete(snapshot.id);
    expect(existsSync(sim.agents.snapshots.dirOf(WS, snapshot.id))).toBe(false);
    await sdk.SandboxInstance.delete("sdk-snap-fork");
    await sdk.SandboxInstance.delete("sdk-snap-src");
  });

  it("a snapshot leaves out mounted drives: they stay shared resources, not copies", async () => {
    await sdk.DriveInstance.create({ name: "snap-drive" });
    const sandbox = await sdk.SandboxInstance.create({ name: "with-drive" });
    await sandbox.drives.mount({ driveName: "snap-drive", mountPath: "/mnt/shared" });
    await sandbox.fs.write("/mnt/shared/on-drive.txt", "drive file");
    await sandbox.fs.write("/own.txt", "own file");
    const snapshot = await sandbox.snapshots.create("with-drive-snap");
    const files = sim.agents.snapshots.dirOf(WS, snapshot.id);
    expect(readFileSync(join(files, "own.txt"), "utf8")).toBe("own file");
    expect(existsSync(join(files, "mnt", "shared", "on-drive.txt"))).toBe(false);
    await sandbox.drives.unmount("/mnt/shared");
    await sdk.Snapshot.delete(snapshot.id);
    await sdk.SandboxInstance.delete("with-drive");
  });
});
