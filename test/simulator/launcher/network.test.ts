import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { BwrapLauncher, type AgentHandle, type LaunchSpec } from "../../../simulator/launcher/index.js";
import { isolationUnavailable, serverCommand } from "../../helpers/sandbox-procs.js";
import { exec, specFor, tempBase } from "./helpers.js";

/**
 * Each isolated sandbox has its own network namespace: two sandboxes both
 * listen on 3000; nothing on the host's loopback (the simulator and its
 * /_sim routes, any local service) is reachable from inside; outbound
 * traffic goes through slirp4netns (here: to the host's own non-loopback
 * address, the only "outside" this machine is sure to have), and not at all
 * with --sandbox-network none.
 */
const NODE = "$(command -v node || echo /opt/sandbox-kit/bin/node)";
const get = (url: string) =>
  `${NODE} -e "fetch('${url}', { signal: AbortSignal.timeout(4000) }).then(r => r.text()).then(t => console.log('ok:' + t), e => console.log('err:' + (e.cause?.code ?? e.name)))"`;

const hostAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

describe.skipIf(isolationUnavailable !== undefined)("isolated sandboxes' network", () => {
  const base = tempBase("net-");
  const running: AgentHandle[] = [];
  let outbound: BwrapLauncher;
  let loopbackServer: Server;
  let anyServer: Server;
  let sim: ServedSimulator;
  beforeAll(async () => {
    outbound = new BwrapLauncher({ network: "outbound" });
    loopbackServer = createServer((_q, s) => s.end("host-loopback"));
    anyServer = createServer((_q, s) => s.end("host-outside"));
    await new Promise<void>((r) => loopbackServer.listen(0, "127.0.0.1", r));
    await new Promise<void>((r) => anyServer.listen(0, "0.0.0.0", r));
    sim = await serveSimulator({ port: 0, apiKey: "network-test-key-01", testHooks: true, logLevel: "silent", launcher: "process" });
  });
  afterAll(async () => {
    await Promise.all(running.map((h) => h.stop(2_000)));
    loopbackServer?.close();
    anyServer?.close();
    await sim?.stop();
  });

  async function start(launcher: BwrapLauncher, name: string, extra: Partial<LaunchSpec> = {}) {
    const spec = specFor(base, name, extra);
    const agent = await launcher.start(spec);
    running.push(agent);
    return { spec, agent };
  }

  it("two sandboxes both listen on port 3000", async () => {
    const a = await start(outbound, "port-a");
    const b = await start(outbound, "port-b");
    for (const s of [a, b]) await exec(s.agent, s.spec.token, `${serverCommand(3000, `net-${s.spec.sandbox}`)} > /dev/null 2>&1 &`);
    for (const s of [a, b]) {
      let out = "";
      for (let i = 0; i < 50 && !out.startsWith("ok:"); i++) out = (await exec(s.agent, s.spec.token, get("http://127.0.0.1:3000/"))).stdout.trim();
      expect(out).toBe("ok:up");
    }
  });

  it("the host's loopback (the simulator's /_sim routes, local services) is not reachable; outbound is", async () => {
    const { spec, agent } = await start(outbound, "reach");
    const loopPort = (loopbackServer.address() as AddressInfo).port;
    const simPort = new URL(sim.url).port;
    for (const url of [
      `http://127.0.0.1:${loopPort}/`,
      `http://10.0.2.2:${loopPort}/`,
      `http://127.0.0.1:${simPort}/_sim/clock`,
      `http://10.0.2.2:${simPort}/_sim/clock`,
    ]) {
      expect((await exec(agent, spec.token, get(url))).stdout.trim()).toMatch(/^err:/);
    }
    // Another sandbox's agent socket is not in this sandbox's filesystem.
    expect((await exec(agent, spec.token, "ls /run/sandbox-agent")).stdout).not.toContain("port-a");
    if (hostAddress) {
      const anyPort = (anyServer.address() as AddressInfo).port;
      expect((await exec(agent, spec.token, get(`http://${hostAddress}:${anyPort}/`))).stdout.trim()).toBe("ok:host-outside");
    }
  });

  it("--sandbox-network none: loopback only", async () => {
    const { spec, agent } = await start(new BwrapLauncher({ network: "none" }), "offline");
    const interfaces = (await exec(agent, spec.token, "cat /proc/net/dev")).stdout;
    expect(interfaces).toContain("lo:");
    expect(interfaces).not.toContain("tap0");
    if (hostAddress) {
      const anyPort = (anyServer.address() as AddressInfo).port;
      expect((await exec(agent, spec.token, get(`http://${hostAddress}:${anyPort}/`))).stdout.trim()).toMatch(/^err:/);
    }
  });
});
