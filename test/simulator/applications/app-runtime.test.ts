import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { findBuilder } from "../../../simulator/images/builders.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { builderTag } from "../../../simulator/images/template-build.js";
import { isolationUnavailable, pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * Applications run their image and answer on their URL: an image built through ImageInstance whose ENTRYPOINT
 * is an HTTP server, an application of it DEPLOYED once the server answers on its port (PORT, 8080 by
 * default), its metadata.url reaching that server; one whose program exits, and one that never listens on its
 * port, end FAILED with the program's last lines; deleting the application leaves no process of it.
 */

const found = await findBuilder();
const skip =
  (found.builder ? "" : ` (skipped: no image builder here: ${found.unavailable.join("; ")})`) ||
  (isolationUnavailable ? ` (skipped: ${isolationUnavailable})` : "");
const store = new ImageStore({ dir: defaultImageCacheDir() });
const suffix = randomBytes(3).toString("hex");
const SANDBOX = `app-http-${suffix}`;
const IMAGE = `sandbox/${SANDBOX}:latest`;
/** The server's file name carries the marker its processes are found by. */
const SCRIPT = `/app/server-${suffix}.js`;
const SERVER = [
  `const http = require("http");`,
  `if (process.env.FAIL_WITH) { console.log("about-to-fail: " + process.env.FAIL_WITH); process.exit(4); }`,
  `const port = Number(process.env.APP_PORT || process.env.PORT || 3000);`,
  `http.createServer((req, res) => { res.writeHead(200, { "content-type": "text/plain" }); res.end("hello-from-app " + req.method + " " + req.url + " PORT=" + process.env.PORT + " GREETING=" + process.env.GREETING); })`,
  `  .on("upgrade", (req, socket) => { const crlf = String.fromCharCode(13, 10); socket.write("HTTP/1.1 101 Switching Protocols" + crlf + "Upgrade: echo" + crlf + "Connection: Upgrade" + crlf + crlf); socket.pipe(socket); })`,
  `  .listen(port, () => console.log("listening on " + port));`,
].join(" ");

/** Upgrades a connection to `url` and returns what the program sends back for `text`. */
function upgradeEcho(url: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { connection: "Upgrade", upgrade: "echo" } });
    req.once("error", reject);
    req.once("response", (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
    req.once("upgrade", (_res, socket) => {
      let got = "";
      socket.on("data", (d: Buffer) => {
        got += d.toString();
        if (got.length >= text.length) {
          socket.destroy();
          resolve(got);
        }
      });
      socket.write(text);
    });
    req.end();
  });
}

type Sdk = Awaited<ReturnType<typeof sdkForSimulator>>;
interface AppEvent {
  status?: string;
  message?: string;
}

describe.skipIf(skip !== "")(`applications run their image${skip}`, () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  const apps: string[] = [];
  beforeAll(async () => {
    sim = await serveSimulator({
      port: 0,
      apiKey: "app-runtime-key",
      workspace: "app-runtime",
      logLevel: "silent",
      imageCache: defaultImageCacheDir(),
      applicationListenTimeoutMs: 15_000,
    });
    sdk = await sdkForSimulator(sim.env);
    const image = sdk.ImageInstance.fromRegistry("node:20-slim")
      .workdir("/app")
      .runCommands(`echo '${SERVER}' > ${SCRIPT}`)
      .expose(8080)
      .entrypoint("node", SCRIPT);
    const built = await image.build({ name: SANDBOX, memory: 2048, timeout: 900_000 });
    expect(built.status).toBe("DEPLOYED");
    // The build's sandbox runs the entrypoint too: gone, only the applications' processes carry the marker.
    await sdk.SandboxInstance.delete(SANDBOX);
    for (let i = 0; i < 100 && pidsWithMarker(`server-${suffix}.js`).length > 0; i++) await sleep(200);
    expect(pidsWithMarker(`server-${suffix}.js`)).toEqual([]);
  }, 900_000);
  afterAll(async () => {
    for (const name of apps) await sdk.ApplicationInstance.delete(name).catch(() => undefined);
    await sdk.SandboxInstance.delete(SANDBOX).catch(() => undefined);
    await sim?.stop();
    for (const image of store.list().filter((i) => i.ref.startsWith(`sandbox/${SANDBOX}:`))) store.remove(image.ref);
    await found.builder?.remove(builderTag(IMAGE));
  }, 180_000);

  /** Waits (bounded) until no process of the test's server is left, then says so. */
  async function noneLeft(): Promise<void> {
    for (let i = 0; i < 100 && pidsWithMarker(`server-${suffix}.js`).length > 0; i++) await sleep(200);
    expect(pidsWithMarker(`server-${suffix}.js`)).toEqual([]);
  }

  /** Polls the application through the SDK until its status is one of `statuses` (the SDK has no wait for applications). */
  async function until(name: string, statuses: string[]): Promise<Awaited<ReturnType<Sdk["ApplicationInstance"]["get"]>>> {
    for (;;) {
      const app = await sdk.ApplicationInstance.get(name);
      if (statuses.includes(app.status ?? "")) return app;
      await sleep(500);
    }
  }

  it("runs the image's entrypoint, DEPLOYED once it answers on 8080, its URL reaching the server; deleting it ends its processes", async () => {
    const name = `app-serve-${suffix}`;
    apps.push(name);
    const created = await sdk.ApplicationInstance.create({ name, image: IMAGE, memory: 2048, envs: [{ name: "GREETING", value: "hi" }] });
    expect(created.status).toBe("DEPLOYING");
    const app = await until(name, ["DEPLOYED", "FAILED"]);
    expect(app.status).toBe("DEPLOYED");
    expect((app.events as AppEvent[]).at(-1)?.message).toContain("answering on port 8080");
    const url = app.metadata.url!;
    expect(url).toBe(`${sim.url}/app-runtime/applications/${name}`);
    // Public, as applications are: no credential.
    const res = await fetch(`${url}/some/path?x=1`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hello-from-app GET /some/path?x=1 PORT=8080 GREETING=hi");
    const posted = await fetch(`${url}/`, { method: "POST", body: "x" });
    expect(await posted.text()).toContain("hello-from-app POST /");

    // An upgrade (a dev server's WebSocket) reaches the program too: here it echoes what it is sent.
    expect(await upgradeEcho(url, "ping-through-the-url")).toBe("ping-through-the-url");

    // A new revision (other envs) replaces the running program: DEPLOYING, then DEPLOYED with the new envs.
    const first = pidsWithMarker(`server-${suffix}.js`);
    expect(first.length).toBeGreaterThan(0);
    const updated = await sdk.ApplicationInstance.update(name, { envs: [{ name: "GREETING", value: "hello" }] });
    expect(updated.spec?.revisions).toHaveLength(2);
    expect(updated.status).toBe("DEPLOYING");
    expect((await until(name, ["DEPLOYED", "FAILED"])).status).toBe("DEPLOYED");
    expect(await (await fetch(`${url}/`)).text()).toContain("GREETING=hello");
    expect(first.filter((pid) => pidsWithMarker(`server-${suffix}.js`).includes(pid))).toEqual([]);

    // Disabled: its program stops, its URL is unavailable.
    await sdk.ApplicationInstance.update(name, { enabled: false });
    for (let i = 0; i < 100 && pidsWithMarker(`server-${suffix}.js`).length > 0; i++) await sleep(200);
    expect(pidsWithMarker(`server-${suffix}.js`)).toEqual([]);
    expect((await fetch(`${url}/`)).status).toBe(503);
    await sdk.ApplicationInstance.update(name, { enabled: true });
    expect((await until(name, ["DEPLOYED", "FAILED"])).status).toBe("DEPLOYED");

    const pids = pidsWithMarker(`server-${suffix}.js`);
    expect(pids.length).toBeGreaterThan(0);
    await sdk.ApplicationInstance.delete(name);
    apps.splice(apps.indexOf(name), 1);
    for (let i = 0; i < 100 && pidsWithMarker(`server-${suffix}.js`).length > 0; i++) await sleep(200);
    expect(pidsWithMarker(`server-${suffix}.js`)).toEqual([]);
    const gone = await fetch(`${url}/`);
    expect(gone.status).toBe(404);
  }, 300_000);

  it("an application whose program exits is FAILED with its last lines; one that never listens on its port is FAILED too", async () => {
    const exits = `app-exits-${suffix}`;
    const deaf = `app-deaf-${suffix}`;
    apps.push(exits, deaf);
    await sdk.ApplicationInstance.create({ name: exits, image: IMAGE, memory: 2048, envs: [{ name: "FAIL_WITH", value: "no-config" }] });
    await sdk.ApplicationInstance.create({ name: deaf, image: IMAGE, memory: 2048, port: 9090, envs: [{ name: "APP_PORT", value: "7000" }] });

    const failed = await until(exits, ["DEPLOYED", "FAILED"]);
    expect(failed.status).toBe("FAILED");
    const last = (failed.events as AppEvent[]).at(-1)!;
    expect(last.message).toContain("exit code 4");
    expect(last.message).toContain("about-to-fail: no-config");
    const unavailable = await fetch(failed.metadata.url!);
    expect(unavailable.status).toBe(503);

    const never = await until(deaf, ["DEPLOYED", "FAILED"]);
    expect(never.status).toBe("FAILED");
    const said = (never.events as AppEvent[]).at(-1)!.message!;
    expect(said).toContain("nothing answered on port 9090");
    expect(said).toContain("listening on 7000");
    await noneLeft();

    // A proxy application (and one bound to a sandbox) runs no compute of its own: always reported DEPLOYED.
    for (const [suffixed, spec] of [
      [`app-proxy-${suffix}`, { proxy: true, revisions: [{ image: SANDBOX }] }],
      [`app-bound-${suffix}`, { image: SANDBOX, extensions: { "ai.blaxel.experimental/bind-to-sandbox": { sandbox: SANDBOX } } }],
    ] as const) {
      apps.push(suffixed);
      const bound = await sdk.ApplicationInstance.create({ metadata: { name: suffixed }, spec } as Parameters<typeof sdk.ApplicationInstance.create>[0]);
      expect(bound.status).toBe("DEPLOYED");
      expect((await sdk.ApplicationInstance.get(suffixed)).status).toBe("DEPLOYED");
    }

    // An image no source has: FAILED naming it, nothing started.
    const missing = `app-missing-${suffix}`;
    apps.push(missing);
    await sdk.ApplicationInstance.create({ name: missing, image: `sandbox/no-such-image-${suffix}:latest`, memory: 2048 });
    const notFound = await until(missing, ["DEPLOYED", "FAILED"]);
    expect(notFound.status).toBe("FAILED");
    expect((notFound.events as AppEvent[]).at(-1)!.message).toContain(`no-such-image-${suffix}`);
  }, 300_000);

  it("deleting its workspace stops an application's program", async () => {
    const headers = (workspace?: string) => ({
      authorization: "Bearer app-runtime-key",
      "content-type": "application/json",
      ...(workspace ? { "x-blaxel-workspace": workspace } : {}),
    });
    const ws = `app-ws-${suffix}`;
    expect((await fetch(`${sim.url}/v0/workspaces`, { method: "POST", headers: headers(), body: JSON.stringify({ name: ws }) })).status).toBe(200);
    const name = `in-doomed-${suffix}`;
    const created = await fetch(`${sim.url}/v0/applications`, {
      method: "POST",
      headers: headers(ws),
      body: JSON.stringify({ metadata: { name }, spec: { image: IMAGE, memory: 2048 } }),
    });
    expect(created.status).toBe(200);
    for (;;) {
      const doc = (await (await fetch(`${sim.url}/v0/applications/${name}`, { headers: headers(ws) })).json()) as { status: string };
      expect(doc.status).not.toBe("FAILED");
      if (doc.status === "DEPLOYED") break;
      await sleep(500);
    }
    expect(pidsWithMarker(`server-${suffix}.js`).length).toBeGreaterThan(0);
    expect((await fetch(`${sim.url}/v0/workspaces/${ws}`, { method: "DELETE", headers: headers() })).status).toBe(200);
    await noneLeft();
  }, 300_000);

  it("with --data, a stopped simulator's applications run again when it restarts", async () => {
    const data = join(trackedTempDir("app-restart-"), "sim.db");
    const key = "app-restart-key";
    const config = { port: 0, apiKey: key, workspace: "app-restart", logLevel: "silent" as const, imageCache: defaultImageCacheDir(), data };
    const name = `app-again-${suffix}`;
    // Plain HTTP here: the SDK keeps the first simulator it was pointed at.
    const api = (base: string, path: string, init: RequestInit = {}) =>
      fetch(`${base}/v0${path}`, {
        ...init,
        headers: { authorization: `Bearer ${key}`, "x-blaxel-workspace": "app-restart", "content-type": "application/json" },
      });
    const deployed = async (base: string) => {
      for (;;) {
        const doc = (await (await api(base, `/applications/${name}`)).json()) as { status: string; events: AppEvent[] };
        if (doc.status === "DEPLOYED" || doc.status === "FAILED") return doc;
        await sleep(500);
      }
    };
    const first = await serveSimulator(config);
    try {
      const created = await api(first.url, "/applications", {
        method: "POST",
        body: JSON.stringify({ metadata: { name }, spec: { image: IMAGE, memory: 2048 } }),
      });
      expect(created.status).toBe(200);
      expect((await deployed(first.url)).status).toBe("DEPLOYED");
      expect(pidsWithMarker(`server-${suffix}.js`).length).toBeGreaterThan(0);
    } finally {
      await first.stop();
    }
    // Stopped with the simulator: nothing of it left running.
    await noneLeft();
    const second = await serveSimulator(config);
    try {
      const again = await deployed(second.url);
      expect(again.status).toBe("DEPLOYED");
      expect(again.events.some((e) => e.message?.includes("the simulator restarted"))).toBe(true);
      expect(await (await fetch(`${second.url}/app-restart/applications/${name}/again`)).text()).toContain("hello-from-app GET /again");
    } finally {
      await second.stop();
    }
    await noneLeft();
  }, 300_000);
});
