import { createServer, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BwrapLauncher, ProcessLauncher, type AgentHandle, type LaunchSpec, type Launcher } from "../../../simulator/launcher/index.js";
import { agentFetch } from "../../../simulator/launcher/endpoint.js";
import { PortRefused } from "../../../simulator/launcher/port-handoff.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { exec, specFor, tempBase } from "./helpers.js";

/**
 * AgentHandle.openPort: a connection to a port inside the sandbox, which the
 * proxy speaks HTTP over itself (one hop). Under the isolating launcher the
 * agent connects inside the sandbox's network and hands the socket over its
 * IPC channel (cold and warm agents alike); the process launcher's sandboxes
 * share the host's network, so the simulator connects itself.
 */

/** One HTTP/1.0 GET over a connected socket: the whole reply. */
function getOver(socket: Socket, path = "/"): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    socket
      .setEncoding("utf8")
      .on("data", (d: string) => (text += d))
      .on("end", () => resolve(text))
      .on("error", reject);
    socket.end(`GET ${path} HTTP/1.0\r\nHost: app\r\n\r\n`);
  });
}

/** Whether anything on the host's own loopback accepts connections on this port. */
function hostAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

/** A port nothing on the host listens on (the in-sandbox server takes it inside). */
async function portFreeOnHost(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    if (!(await hostAccepts(port))) return port;
  }
}

/** Starts a server inside the sandbox through the agent's /process API; resolves once it answers through openPort. */
async function serveInside(agent: AgentHandle, spec: LaunchSpec, port: number): Promise<void> {
  const script = `require("http").createServer((q, s) => s.end("inside " + require("os").hostname() + " " + q.url)).listen(${port}, "127.0.0.1")`;
  const res = await agentFetch(agent, {
    method: "POST",
    path: "/process",
    headers: { authorization: `Bearer ${spec.token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "app", command: `node -e '${script}'` }),
  });
  expect(res.status).toBe(200);
  for (let tries = 0; ; tries++) {
    try {
      return void (await agent.openPort!(port)).destroy();
    } catch (err) {
      if (!(err instanceof PortRefused) || tries > 200) throw err;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

describe.skipIf(isolationUnavailable !== undefined)("openPort under the isolating launcher", () => {
  const base = tempBase("handoff-");
  const handles: AgentHandle[] = [];
  const launchers: Launcher[] = [];
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.stop(2_000)));
    await Promise.all(launchers.map((l) => l.close?.()));
  });

  async function started(launcher: BwrapLauncher, name: string): Promise<{ agent: AgentHandle; spec: LaunchSpec }> {
    const spec = specFor(join(base, "ws"), name, { drivesDir: join(base, "drives") });
    const agent = await launcher.start(spec);
    handles.push(agent);
    return { agent, spec };
  }

  it("reaches a server on the sandbox's own loopback, which the host cannot reach; 'nothing listening' is a PortRefused", async () => {
    const launcher = new BwrapLauncher({ network: "none" });
    const { agent, spec } = await started(launcher, "cold");
    const port = await portFreeOnHost();
    await serveInside(agent, spec, port);
    expect(await getOver(await agent.openPort!(port), "/x?y=1")).toMatch(/\r\n\r\ninside cold \/x\?y=1$/);
    expect(await hostAccepts(port)).toBe(false);
    const refused = await agent.openPort!(port === 1 ? 2 : 1).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(PortRefused);
    expect((refused as PortRefused).message).toContain("nothing is listening on port");
  });

  it("the IPC channel is the agent's alone: commands it runs do not inherit it", async () => {
    const launcher = new BwrapLauncher({ network: "none" });
    const { agent, spec } = await started(launcher, "fds");
    const fds = await exec(agent, spec.token, "ls -l /proc/self/fd/ | grep -c socket: || true");
    expect(fds.stdout.trim()).toBe("0");
  });

  it("works for a sandbox that took over a warm one, and stops with its agent (an error, not a PortRefused)", async () => {
    const launcher = new BwrapLauncher({ network: "none", warm: 1 });
    launchers.push(launcher);
    await started(launcher, "first");
    await launcher.warmed();
    const { agent, spec } = await started(launcher, "taken");
    const port = await portFreeOnHost();
    await serveInside(agent, spec, port);
    expect(await getOver(await agent.openPort!(port))).toMatch(/inside taken \/$/);
    await agent.stop(2_000);
    const after = await agent.openPort!(port).catch((err: unknown) => err);
    expect(after).toBeInstanceOf(Error);
    expect(after).not.toBeInstanceOf(PortRefused);
  });
});

describe("openPort under the process launcher (the host's network)", () => {
  let server: Server | undefined;
  let agent: AgentHandle | undefined;
  afterAll(async () => {
    await agent?.stop(2_000);
    server?.close();
  });

  it("connects on the host, as the agent's /port/{n} would", async () => {
    server = createServer((q, s) => s.end(`host app ${q.url}`));
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    agent = await new ProcessLauncher().start(specFor(tempBase("handoff-process-"), "box"));
    const port = (server.address() as AddressInfo).port;
    expect(await getOver(await agent.openPort!(port), "/p")).toMatch(/host app \/p$/);
    await expect(agent.openPort!(1)).rejects.toBeInstanceOf(PortRefused);
  });
});
