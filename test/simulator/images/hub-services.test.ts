import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { createLogger } from "../../../src/logging.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { isAlive } from "../launcher/helpers.js";

/**
 * Real hub images under the default (isolating) launcher start what their
 * entrypoints start, with nobody asking: a blaxel/nextjs sandbox serves its
 * dev server on port 3000, a blaxel/jupyter-server sandbox runs the code
 * interpreter the SDK's CodeInterpreter calls (state kept between runs).
 * Building these images takes minutes, so each is tested when the shared
 * per-user cache already holds an up-to-date build, or when asked
 * (SANDBOX_KIT_HUB_IMAGE_TEST=nextjs,jupyter-server builds them first), as in hub-build.test.ts.
 */
type Sdk = typeof import("@blaxel/core");
const WS = "hub-services";
const KEY = "hub-services-admin-key";
const store = new ImageStore({ dir: defaultImageCacheDir(), docker: null });
const wanted = (process.env.SANDBOX_KIT_HUB_IMAGE_TEST ?? "").split(",").map((s) => s.trim());

async function skipReason(name: string): Promise<string> {
  if (isolationUnavailable) return ` (skipped: ${isolationUnavailable})`;
  if (wanted.includes(name) || wanted.includes("all") || (await store.locate(`blaxel/${name}`)).kind === "stored") return "";
  return ` (skipped: building blaxel/${name} takes minutes; run with SANDBOX_KIT_HUB_IMAGE_TEST=${name}, or build it ahead: sandbox-sim images build blaxel/${name})`;
}

const nextSkip = await skipReason("nextjs");
const jupyterSkip = await skipReason("jupyter-server");

let sim: ServedSimulator;
let sdk: Sdk;
let logText = "";
const serviceWarnings = () => logText.split("\n").filter((l) => l.includes("could not start the image's service"));

beforeAll(async () => {
  if (nextSkip && jupyterSkip) return;
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      logText += chunk.toString();
      done();
    },
  });
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS }, { logger: createLogger({ level: "warn", destination, format: "json" }) });
  sdk = await sdkForSimulator(sim.env);
}, 60_000);
afterAll(async () => {
  await sim?.stop();
});

/** Deletes the sandbox and checks its processes (its PID namespace's init) are gone. */
async function deleteAndCheck(name: string): Promise<void> {
  const sandboxPid = sim.agents?.get(WS, name)?.sandboxPid;
  await sdk.SandboxInstance.delete(name);
  if (!sandboxPid) return;
  const deadline = Date.now() + 20_000;
  while (isAlive(sandboxPid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(isAlive(sandboxPid)).toBe(false);
}

describe.skipIf(nextSkip !== "")(`a blaxel/nextjs sandbox${nextSkip}`, () => {
  it("serves its dev server on port 3000 without the caller starting anything", { timeout: 45 * 60_000 }, async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "next-app", image: "blaxel/nextjs", memory: 4096 });
    expect(await sandbox.process.get("dev-server")).toMatchObject({ status: "running", workingDir: "/blaxel/app" });
    // next dev listens at once and compiles the page on its first request: poll until it answers.
    let status = 0;
    let body = "";
    const deadline = Date.now() + 300_000;
    while (Date.now() < deadline) {
      const res = await sandbox.fetch(3000, "/").catch(() => undefined);
      status = res?.status ?? 0;
      body = (await res?.text().catch(() => "")) ?? "";
      if (status === 200) break;
      await new Promise((r) => setTimeout(r, 1_000));
    }
    expect(status).toBe(200);
    expect(body).toMatch(/<html/i);
    expect(serviceWarnings()).toEqual([]);
    await deleteAndCheck("next-app");
  });
});

describe.skipIf(jupyterSkip !== "")(`a blaxel/jupyter-server sandbox${jupyterSkip}`, () => {
  it("runs CodeInterpreter's code at once after the create, keeping state between runs and in its own contexts", { timeout: 45 * 60_000 }, async () => {
    const interpreter = await sdk.CodeInterpreter.create({ name: "code-interpreter" });
    const two = await interpreter.runCode("print(1+1)");
    expect(two.error).toBeNull();
    expect(two.logs.stdout.join("")).toBe("2\n");
    await interpreter.runCode("x = 5");
    expect((await interpreter.runCode("print(x)")).logs.stdout.join("")).toBe("5\n");
    const context = await interpreter.createCodeContext({ language: "python", cwd: "/tmp" });
    expect(context.id).not.toBe("");
    const inContext = await interpreter.runCode("import os\nprint(os.getcwd())\nprint('x' in globals())", { context });
    expect(inContext.logs.stdout.join("")).toBe("/tmp\nFalse\n");
    expect(serviceWarnings()).toEqual([]);
    await deleteAndCheck("code-interpreter");
  });
});
