import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * Hostile requests through the sandbox URL, over real agents
 * (npm run build first: the agents run from dist/). Each test replays the
 * hostile tester's request and fails on the code before the fix.
 */
type Sdk = typeof import("@blaxel/core");
const KEY = "hardening-admin-key";
const MEMBER = "hardening-member-key";
const WS = "hard-ws";
let sim: ServedSimulator;
let sdk: Sdk;

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw HTTP request (fetch cannot set Host, nor send a body it never finishes). */
function raw(opts: { method?: string; path: string; headers?: Record<string, string | number>; body?: string | Buffer; endBody?: boolean }): Promise<Raw> {
  const url = new URL(sim.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method: opts.method ?? "GET", path: opts.path, headers: opts.headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        req.destroy();
      });
    });
    req.on("error", reject);
    if (opts.body !== undefined) req.write(opts.body);
    if (opts.endBody !== false) req.end();
  });
}

const admin = { authorization: `Bearer ${KEY}` };
const member = { authorization: `Bearer ${MEMBER}` };

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = admin): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { ...headers, "x-blaxel-workspace": WS, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: WS, logLevel: "silent", testHooks: true });
  const seeded = await fetch(`${sim.url}/_sim/seed`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ users: [{ email: "member@local.test", accountId: "local", role: "member", workspaces: [WS], apiKey: MEMBER }] }),
  });
  expect(seeded.status).toBe(200);
  sdk = await sdkForSimulator(sim.env);
  await sdk.SandboxInstance.create({ name: "box" });
});
afterAll(async () => {
  await sim?.stop();
});

describe("4. secrets through the sandbox URL", () => {
  it("show_secrets reaches the agent only from an admin; *** sent back keeps the stored value on the agent", async () => {
    const created = await api("POST", `/sbx/${WS}/box/schedules`, { type: "cron", value: "0 * * * *", input: { command: "true", env: { TOKEN: "s3cret" } } });
    expect(created.status).toBe(200);
    const id = created.body.id as string;
    const asMember = await api("GET", `/sbx/${WS}/box/schedules/${id}?show_secrets=true`, undefined, member);
    expect(asMember.status).toBe(200);
    expect(asMember.body.input.env.TOKEN).toBe("***");
    const sneaky = await api("GET", `/sbx/${WS}/box/schedules/${id}?show%5Fsecrets=1`, undefined, member);
    expect(sneaky.body.input.env.TOKEN).toBe("***");
    const asAdmin = await api("GET", `/sbx/${WS}/box/schedules/${id}?show_secrets=true`);
    expect(asAdmin.body.input.env.TOKEN).toBe("s3cret");

    // read-modify-write with the masked value, on the agent and through the control plane
    await api("PUT", `/sbx/${WS}/box/schedules/${id}`, { type: "cron", value: "5 * * * *", input: { command: "true", env: { TOKEN: "***", NEW: "n" } } });
    const viaCp = await api("GET", `/v0/sandboxes/box/schedules/${id}`);
    expect(viaCp.body.input.env).toEqual({ TOKEN: "***", NEW: "***" });
    const put = await api("PUT", `/v0/sandboxes/box/schedules/${id}`, {
      type: "cron",
      value: "10 * * * *",
      input: { command: viaCp.body.input.command, env: viaCp.body.input.env },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const after = await api("GET", `/sbx/${WS}/box/schedules/${id}?show_secrets=true`);
    expect(after.body.input.env).toEqual({ TOKEN: "s3cret", NEW: "n" });
  });
});

describe("5. host names are bounded before any lookup", () => {
  it("answers 400 for a host name over 253 bytes or a label over 63, before routing", async () => {
    const hostile = await raw({ path: "/", headers: { host: `sbx-${"a-".repeat(7000)}x.us-pdx-1.localhost` } });
    expect(hostile.status).toBe(400);
    expect(hostile.body).toContain("253");
    const longLabel = await raw({ path: "/", headers: { host: `sbx-box-${"w".repeat(60)}.us-pdx-1.localhost` } });
    expect(longLabel.status).toBe(400);
    expect(longLabel.body).toContain("63");
  });
});

describe("6. the sandbox URL refuses an anonymous body without reading it", () => {
  it("answers 401 while the body is still being sent, and closes the connection", async () => {
    const res = await raw({
      method: "PUT",
      path: `/sbx/${WS}/box/filesystem/tmp/x`,
      headers: { "content-type": "application/octet-stream", "content-length": 9_900_000 },
      body: Buffer.alloc(1024),
      endBody: false,
    });
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe("close");
  });

  it("the control plane answers 401 before reading a body (it used to wait for all 9.9 MB)", async () => {
    const res = await raw({
      method: "POST",
      path: "/v0/sandboxes",
      headers: { "content-type": "application/json", "content-length": 9_900_000 },
      body: "{",
      endBody: false,
    });
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe("close");
  });
});

describe("8. no existence oracle for anonymous callers", () => {
  it("a preflight answers the same for an existing and a missing sandbox", async () => {
    const preflight = (sandbox: string) =>
      raw({ method: "OPTIONS", path: `/sbx/${WS}/${sandbox}/process`, headers: { origin: "https://app.example", "access-control-request-method": "POST" } });
    const existing = await preflight("box");
    const missing = await preflight("no-such-box");
    expect(existing.status).toBe(204);
    expect(missing.status).toBe(existing.status);
    expect(missing.body).toBe(existing.body);
    for (const h of ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"])
      expect(missing.headers[h]).toBe(existing.headers[h]);
  });
});

describe("2. scopes on the sandbox URL", () => {
  it("a read-only token or a drive's token cannot use the sandbox URL", async () => {
    await api("POST", "/v0/drives", { metadata: { name: "scratch" }, spec: {} });
    const { body } = await api("POST", "/v0/drives/scratch/access-token");
    const res = await fetch(`${sim.url}/sbx/${WS}/box/process`, { headers: { authorization: `Bearer ${body.access_token}` } });
    expect(res.status).toBe(403);
  });
});

describe("7. drive permissions at mount time", () => {
  it("a sandbox without the drive's labels cannot mount it; a read grant needs readOnly; labels are re-read", async () => {
    await sdk.DriveInstance.create({
      name: "secret-drive",
      permissions: [{ labels: { team: "secret" } }, { labels: { team: "audit" }, mode: "read", path: "/reports" }],
    });
    const other = await sdk.SandboxInstance.create({ name: "other-box", labels: { team: "other" } });
    await expect(other.drives.mount({ driveName: "secret-drive", mountPath: "/mnt/secret" })).rejects.toMatchObject({ status: 403 });

    const owner = await sdk.SandboxInstance.create({ name: "owner-box", labels: { team: "secret" } });
    await owner.drives.mount({ driveName: "secret-drive", mountPath: "/mnt/secret" });
    await owner.fs.write("/mnt/secret/reports/q1.txt", "numbers");

    const auditor = await sdk.SandboxInstance.create({ name: "audit-box", labels: { team: "audit" } });
    await expect(auditor.drives.mount({ driveName: "secret-drive", mountPath: "/mnt/all", readOnly: true })).rejects.toMatchObject({ status: 403 });
    await expect(auditor.drives.mount({ driveName: "secret-drive", drivePath: "/reports", mountPath: "/mnt/reports" })).rejects.toMatchObject({ status: 403 });
    await auditor.drives.mount({ driveName: "secret-drive", drivePath: "/reports", mountPath: "/mnt/reports", readOnly: true });
    expect(await auditor.fs.read("/mnt/reports/q1.txt")).toBe("numbers");

    // relabelled: the next mount sees the new labels
    expect((await api("PUT", "/v0/sandboxes/other-box", { metadata: { name: "other-box", labels: { team: "secret" } }, spec: {} })).status).toBe(200);
    await other.drives.mount({ driveName: "secret-drive", mountPath: "/mnt/secret" });
    for (const box of [owner, auditor, other]) for (const m of await box.drives.list()) await box.drives.unmount(m.mountPath!);
  });
});
