import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { SandboxInstance } from "@blaxel/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { MOUNT, unmountUnder } from "./helpers.js";

process.env.BL_DISABLE_H2 = "true";
// The SDK sends its API key as `x-blaxel-authorization: Bearer <key>`; the
// agent is started with that key as its token, so auth is exercised too.
const TOKEN = "drives-sdk-test-key";
process.env.BL_API_KEY = TOKEN;
process.env.BL_WORKSPACE = "test";

// Real mounts where this process may mount; otherwise the SDK contract is
// still checked against the symlink backend (same wire, same rules).
const BACKEND = MOUNT.ok ? "bind" : "symlink";

/** What users run: @blaxel/core's sandbox.drives against a live agent. */
describe(`@blaxel/core sandbox.drives (${BACKEND} backend)`, () => {
  let agent: TestAgent;
  let sandbox: SandboxInstance;

  beforeAll(async () => {
    agent = await startTestAgent({ driveBackend: BACKEND, token: TOKEN });
    sandbox = new SandboxInstance({ metadata: { name: "t", url: agent.url } } as never);
  });

  afterAll(async () => {
    unmountUnder(dirname(agent.root));
    await agent.stop();
  });

  it("mounts, lists and unmounts through the SDK", async () => {
    const mounted = await sandbox.drives.mount({ driveName: "sdk-drive", mountPath: "/mnt/sdk", drivePath: "/projects" });
    expect(mounted).toMatchObject({ success: true, driveName: "sdk-drive", mountPath: "/mnt/sdk", drivePath: "/projects", readOnly: false });
    writeFileSync(join(agent.root, "mnt/sdk/file.txt"), "via sdk");
    expect(existsSync(join(agent.dataDir, "drives", "sdk-drive", "projects", "file.txt"))).toBe(true);

    expect(await sandbox.drives.list()).toEqual([{ driveName: "sdk-drive", mountPath: "/mnt/sdk", drivePath: "/projects", readOnly: false, backend: BACKEND }]);

    // The SDK strips the leading slash and percent-encodes the rest: mnt%2Fsdk.
    const gone = await sandbox.drives.unmount("/mnt/sdk");
    expect(gone).toEqual({ success: true, message: "Drive unmounted successfully", mountPath: "/mnt/sdk" });
    expect(await sandbox.drives.list()).toEqual([]);
  });

  it("surfaces the agent's 400, 409 and 404 as errors carrying the status and message", async () => {
    await expect(sandbox.drives.mount({ driveName: "bad name", mountPath: "/mnt/x" })).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining("driveName"),
    });
    await sandbox.drives.mount({ driveName: "one", mountPath: "/mnt/taken" });
    await expect(sandbox.drives.mount({ driveName: "two", mountPath: "/mnt/taken" })).rejects.toMatchObject({
      status: 409,
      message: expect.stringContaining("already in use"),
    });
    await sandbox.drives.unmount("mnt/taken");
    await expect(sandbox.drives.unmount("/mnt/taken")).rejects.toMatchObject({ status: 404 });
  });
});
