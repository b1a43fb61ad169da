import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { ProcessLauncher, type Launcher } from "../../../simulator/launcher/index.js";
import { createLogger } from "../../../src/logging.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { writeOciLayout } from "./tar-writer.js";

/**
 * An image's ENTRYPOINT/CMD runs when its sandbox starts, as the sandbox's
 * process `entrypoint` started through the agent once it is healthy (output
 * in its logs); one that ends is reported in the simulator's log, the sandbox
 * keeps running. The image's config is what an import records; the launcher
 * is the process launcher, recorded as laying sandboxes over images, so the
 * entrypoint (a host `sh` here) runs without isolation tools.
 */
type Sdk = typeof import("@blaxel/core");
let sim: ServedSimulator;
let sdk: Sdk;
const logLines: string[] = [];
const WS = "entry-ws";

beforeAll(async () => {
  const cache = trackedTempDir("entry-images-");
  const store = new ImageStore({ dir: cache, docker: null });
  const layout = (config: Record<string, unknown>) => {
    const dir = join(trackedTempDir("entry-layout-"), "oci");
    writeOciLayout(dir, [[{ name: "etc/motd", content: "hi" }]], { config: { Env: ["PATH=/usr/bin:/bin"], WorkingDir: "/", ...config } });
    return dir;
  };
  await store.import(layout({ Entrypoint: ["/bin/sh", "-c"], Cmd: ["echo \"started as $0\"; echo 'it'\\''s done'; exit 3"] }), "ends:v1");
  await store.import(layout({}), "plain:v1");
  const inner = new ProcessLauncher();
  const launcher: Launcher = { name: "recording", usesImageRoot: true, start: (spec) => inner.start(spec), close: () => inner.close?.() ?? Promise.resolve() };
  const logger = createLogger({ level: "warn", destination: { write: (line: string) => void logLines.push(line) } as unknown as NodeJS.WritableStream });
  sim = await serveSimulator({ port: 0, apiKey: "entry-admin-key", workspace: WS, logLevel: "warn", imageCache: cache }, { launcher, logger });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

describe("an image's ENTRYPOINT and CMD", () => {
  it("runs as the process 'entrypoint' (ENTRYPOINT then CMD, words kept); its end is logged and the sandbox keeps running", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "ends", image: "ends:v1" });
    let record = await sandbox.process.get("entrypoint");
    for (let i = 0; i < 80 && record.status === "running"; i++) {
      await sleep(100);
      record = await sandbox.process.get("entrypoint");
    }
    expect(record).toMatchObject({ name: "entrypoint", status: "failed", exitCode: 3 });
    expect(await sandbox.process.logs("entrypoint")).toContain("it's done");
    for (let i = 0; i < 50 && !logLines.some((l) => l.includes("entrypoint ended")); i++) await sleep(100);
    expect(logLines.find((l) => l.includes("entrypoint ended"))).toContain('"exitCode":3');
    expect((await sandbox.process.exec({ command: "echo still here", waitForCompletion: true })).logs?.trim()).toBe("still here");
    await sdk.SandboxInstance.delete("ends");
  });

  it("an image without one gets its agent and no entrypoint process", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "plain", image: "plain:v1" });
    expect((await sandbox.process.list()).map((p) => p.name)).not.toContain("entrypoint");
    expect((await sandbox.process.exec({ command: "echo up", waitForCompletion: true })).logs?.trim()).toBe("up");
    await sdk.SandboxInstance.delete("plain");
  });
});
