import { createServer, type Server } from "node:http";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../../sandbox-agent/process/os.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { freePort, killAll, nodeServer, until } from "./helpers.js";

let agent: TestAgent;
let callbacks: Server;
let callbackUrl: string;
const received: { pid: number; port: number }[] = [];

beforeAll(async () => {
  agent = await startTestAgent();
  callbacks = createServer((req, res) => {
    let body = "";
    req
      .on("data", (c) => (body += c))
      .on("end", () => {
        received.push(JSON.parse(body));
        res.end("{}");
      });
  });
  await new Promise<void>((r) => callbacks.listen(0, "127.0.0.1", r));
  callbackUrl = `http://127.0.0.1:${(callbacks.address() as { port: number }).port}/ports`;
});
afterAll(async () => {
  killAll(agent);
  await agent.stop();
  await new Promise((r) => callbacks.close(r));
});

const exec = (body: object) => request(agent.url).post("/process").send(body);

describe("waitForPorts (reference §9.6)", () => {
  it("answers once the server listens on a routable address; it is reachable at once", async () => {
    const port = await freePort();
    const res = await exec({ command: `sleep 0.3; ${nodeServer(port)}`, name: "web", waitForPorts: [port], timeout: 20 }).expect(200);
    expect(res.body).toMatchObject({ name: "web", status: "running" });
    const reply = await fetch(`http://127.0.0.1:${port}/`);
    expect(await reply.text()).toMatch(/^hello from \d+$/);
    await request(agent.url).delete("/process/web/kill").expect(200);
  });

  it("waits for every listed port; a server left in the background by the shell counts (its process group)", async () => {
    const [a, b] = [await freePort(), await freePort()];
    const command = `(${nodeServer(a)}) & sleep 0.3; (${nodeServer(b, "::")}) & echo started`;
    const res = await exec({ command, name: "two", waitForPorts: [a, b], timeout: 20 }).expect(200);
    expect(res.body.name).toBe("two");
    for (const port of [a, b]) expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200);
    // the shell has ended; kill still reaches the servers it left in its group
    const run = agent.runtime.deps.processes.runOf(Number(res.body.pid))!;
    await request(agent.url).delete("/process/two/kill").expect(200);
    await until(() => !groupAlive(run.runPid), "the servers to die");
  });

  it("a loopback-only listener does not count: 422 'timed out waiting for ports', the process keeps running", async () => {
    const port = await freePort();
    const res = await exec({ command: nodeServer(port, "127.0.0.1"), name: "local-only", waitForPorts: [port], timeout: 2 }).expect(422);
    expect(res.body).toEqual({ error: "process timed out waiting for ports after 2 seconds" });
    expect((await request(agent.url).get("/process/local-only").expect(200)).body.status).toBe("running");
    await request(agent.url).delete("/process/local-only/kill").expect(200);
  });

  it("a process that ends before listening ends the wait with a 422 (the reference would wait on)", async () => {
    const port = await freePort();
    const res = await exec({ command: "exit 4", waitForPorts: [port], timeout: 0 }).expect(422);
    expect(res.body.error).toBe(`process ended (failed, exit code 4) before listening on port ${port}`);
  });

  it("bad ports are refused", async () => {
    expect((await exec({ command: "true", waitForPorts: [0] }).expect(400)).body.error).toMatch(/waitForPorts\[0\]/);
  });
});

describe("/network/process/{pid} (reference §9.9)", () => {
  it("ports: every socket of the process tree with the reference's PortInfo fields", async () => {
    const port = await freePort();
    const started = (await exec({ command: nodeServer(port), name: "listed", waitForPorts: [port], timeout: 20 }).expect(200)).body;
    const body = (await request(agent.url).get(`/network/process/${started.pid}/ports`).expect(200)).body;
    expect(body.pid).toBe(Number(started.pid));
    expect(body.ports).toContainEqual({
      pid: Number(started.pid),
      protocol: "tcp",
      localAddr: "0.0.0.0",
      localPort: port,
      remoteAddr: "0.0.0.0",
      remotePort: 0,
      state: "LISTEN",
      processName: "node",
    });
    await request(agent.url).delete("/process/listed/kill").expect(200);
    expect((await request(agent.url).get(`/network/process/${started.pid}/ports`).expect(200)).body).toEqual({ pid: Number(started.pid), ports: [] });
  });

  it("an unknown pid has no ports; a non-numeric one is a 400", async () => {
    expect((await request(agent.url).get("/network/process/1/ports").expect(200)).body).toEqual({ pid: 1, ports: [] });
    expect((await request(agent.url).get("/network/process/abc/ports").expect(400)).body).toEqual({ error: "invalid PID" });
  });

  it("monitor: POSTs {pid, port} to the callback for each new port; DELETE stops it", async () => {
    const port = await freePort();
    const started = (await exec({ command: `sleep 0.5; ${nodeServer(port)}`, name: "watched" }).expect(200)).body;
    const on = await request(agent.url).post(`/network/process/${started.pid}/monitor`).send({ callback: callbackUrl }).expect(200);
    expect(on.body).toEqual({ path: "", message: "Port monitoring started" });
    await until(() => received.find((r) => r.port === port), "the callback");
    expect(received).toContainEqual({ pid: Number(started.pid), port });
    const off = await request(agent.url).delete(`/network/process/${started.pid}/monitor`).expect(200);
    expect(off.body).toEqual({ path: "", message: "Port monitoring stopped" });
    await request(agent.url).delete("/process/watched/kill").expect(200);
  });

  it("monitor errors: bad body 400, unknown process 404", async () => {
    const started = (await exec({ command: "sleep 30", name: "mon-err" }).expect(200)).body;
    expect((await request(agent.url).post(`/network/process/${started.pid}/monitor`).send({}).expect(400)).body.error).toMatch(/invalid request body/);
    expect((await request(agent.url).post(`/network/process/${started.pid}/monitor`).send({ callback: "file:///etc/passwd" }).expect(400)).body.error).toMatch(
      /http\(s\) URL/,
    );
    await request(agent.url).post("/network/process/1/monitor").send({ callback: callbackUrl }).expect(404);
    await request(agent.url).delete("/process/mon-err/kill").expect(200);
  });
});
