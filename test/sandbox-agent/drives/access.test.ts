import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { ACCESS_DIR, driveAccessDenied } from "../../../sandbox-agent/drives/access.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/** A drive's permissions (the SDK's DriveSpec.permissions) decide a mount under --drives-existing-only. */
describe("drive permissions", () => {
  it("grants by labels (AND within, OR across), path and mode", () => {
    const perms = [{ labels: { team: "secret", env: "prod" } }, { labels: { team: "audit" }, mode: "read" as const, path: "/reports" }];
    expect(driveAccessDenied([], {}, "/", false)).toBeUndefined();
    expect(driveAccessDenied(perms, { team: "secret", env: "prod", extra: "x" }, "/any/where", false)).toBeUndefined();
    expect(driveAccessDenied(perms, { team: "secret" }, "/", false)).toMatch(/no permission/);
    expect(driveAccessDenied(perms, { team: "other" }, "/", true)).toMatch(/no permission/);
    expect(driveAccessDenied(perms, { team: "audit" }, "/reports/q1", true)).toBeUndefined();
    expect(driveAccessDenied(perms, { team: "audit" }, "/reports", false)).toMatch(/readOnly: true/);
    expect(driveAccessDenied(perms, { team: "audit" }, "/reportsx", true)).toMatch(/no permission/);
    expect(driveAccessDenied([{ labels: {} }], {}, "/", false)).toBeUndefined();
  });

  const started: TestAgent[] = [];
  afterEach(async () => {
    for (const a of started.splice(0)) await a.stop();
  });

  it("the agent refuses a mount the drive's permissions do not grant this sandbox (403), and reads labels at each mount", async () => {
    const a = await startTestAgent({ driveBackend: "symlink", drivesExistingOnly: true, sandboxName: "box" });
    started.push(a);
    const drives = join(a.dataDir, "drives");
    mkdirSync(join(drives, "vault"), { recursive: true });
    mkdirSync(join(drives, ACCESS_DIR, "drives"), { recursive: true });
    mkdirSync(join(drives, ACCESS_DIR, "sandboxes"), { recursive: true });
    writeFileSync(join(drives, ACCESS_DIR, "drives", "vault.json"), JSON.stringify({ permissions: [{ labels: { team: "secret" } }] }));
    const refused = await request(a.url).post("/drives/mount").send({ driveName: "vault", mountPath: "/mnt/vault" }).expect(403);
    expect(refused.body.error).toMatch(/^driveName: permission denied: drive "vault": no permission/);
    writeFileSync(join(drives, ACCESS_DIR, "sandboxes", "box.json"), JSON.stringify({ labels: { team: "other" } }));
    await request(a.url).post("/drives/mount").send({ driveName: "vault", mountPath: "/mnt/vault" }).expect(403);
    writeFileSync(join(drives, ACCESS_DIR, "sandboxes", "box.json"), JSON.stringify({ labels: { team: "secret" } }));
    await request(a.url).post("/drives/mount").send({ driveName: "vault", mountPath: "/mnt/vault" }).expect(200);
  });
});
