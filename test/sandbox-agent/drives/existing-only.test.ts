import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { parseAgentConfig } from "../../../sandbox-agent/config.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/** --drives-existing-only: drives provisioned by a control plane (sandbox-sim) are mounted, never created. */
describe("drives, --drives-existing-only", () => {
  const started: TestAgent[] = [];
  afterEach(async () => {
    for (const a of started.splice(0)) await a.stop();
  });

  it("is off by default and set by the flag", () => {
    expect(parseAgentConfig([], {})).toMatchObject({ drivesExistingOnly: false });
    expect(parseAgentConfig(["--drives-existing-only"], {})).toMatchObject({ drivesExistingOnly: true });
  });

  it("refuses a drive whose directory does not exist (404 naming it), mounts one that does", async () => {
    const a = await startTestAgent({ driveBackend: "symlink", drivesExistingOnly: true });
    started.push(a);
    const drives = join(a.dataDir, "drives");
    const refused = await request(a.url).post("/drives/mount").send({ driveName: "ghost", mountPath: "/mnt/ghost" }).expect(404);
    expect(refused.body.error).toMatch(/^driveName: drive "ghost" does not exist/);
    expect(existsSync(join(drives, "ghost"))).toBe(false);
    expect(existsSync(join(a.root, "mnt/ghost"))).toBe(false);
    mkdirSync(join(drives, "real"), { recursive: true });
    await request(a.url).post("/drives/mount").send({ driveName: "real", mountPath: "/mnt/real" }).expect(200);
  });
});
