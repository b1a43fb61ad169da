import { readlinkSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimConfig } from "../../../simulator/config.js";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { openReadyTerminal, openTerminal, run, until } from "../../helpers/terminal-client.js";

/**
 * The terminal through the simulator's sandbox URL, in the default isolated
 * sandbox (bwrap, the agent over the sandbox's root): the PTY binding comes
 * with the agent, /dev/pts is the sandbox's own. Credentials as the edge takes
 * them: the SDK's headers, ?token= with a platform key (the CLI), or a
 * session's token. (npm run build first: the agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
const WS = "terminals";
const KEY = "terminal-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;
let sandbox: InstanceType<Sdk["SandboxInstance"]>;
let sandboxUrl: string;

/** The cases, against a simulator whose sandboxes' agents are served as `agentMode` says (one per test file: the SDK is configured once per process). */
export function terminalCases(agentMode: SimConfig["agentMode"], skip = isolationUnavailable): void {
  beforeAll(async () => {
    if (skip) return;
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: WS, testHooks: true, logLevel: "silent", agentMode });
    sdk = await sdkForSimulator(sim.env);
    sandbox = await sdk.SandboxInstance.create({ name: "shell" });
    sandboxUrl = sandbox.metadata.url!;
  }, 60_000);
  afterAll(async () => {
    await sim?.stop();
  });

  const wsOf = (url: string) => `${url}/terminal/ws`;

  describe.skipIf(skip !== undefined)(`the terminal through the sandbox URL, isolated (agent mode ${agentMode})${skip ? ` (skipped: ${skip})` : ""}`, () => {
    it("with the SDK's credential header: a real PTY inside the sandbox", async () => {
      const term = await openReadyTerminal(wsOf(sandboxUrl), { "x-blaxel-authorization": `Bearer ${KEY}`, "x-blaxel-workspace": WS });
      const from = term.output().length;
      term.input("echo hi-$RANDOM\n");
      await term.waitFor(/hi-\d+/, { from });
      expect((await run(term, "tty")).trim()).toMatch(/^\/dev\/pts\/\d+$/);
      // Its own PID namespace: the shell does not see the host's processes.
      const ns = (await run(term, "readlink /proc/self/ns/pid")).trim();
      expect(ns).toMatch(/^pid:\[\d+\]$/);
      expect(ns).not.toBe(readlinkSync("/proc/self/ns/pid"));
      term.resize(101, 33);
      expect((await run(term, "stty size")).trim()).toBe("33 101");
      term.input("exit 3\n");
      expect(await term.closed).toEqual({ code: 1000, reason: "shell exited with status 3" });
    });

    it("with ?token= as the CLI sends it, by path and by host name", async () => {
      const term = await openReadyTerminal(`${wsOf(sandboxUrl)}?token=${KEY}&cols=90&rows=20`);
      expect((await run(term, "stty size")).trim()).toBe("20 90");
      // The agent got its own token in a header and the query without the caller's key.
      expect(await run(term, "cat /proc/$PPID/cmdline 2>/dev/null | tr '\\\\0' ' '")).not.toContain(KEY);
      term.ws.close();
      const wsId = (sim.deps.accounts.workspace(WS)!.doc as { id: string }).id;
      const url = new URL(sim.url);
      const byHost = await openReadyTerminal(`ws://127.0.0.1:${url.port}/terminal/ws?token=${KEY}`, { host: `sbx-shell-${wsId}.local.localhost:${url.port}` });
      expect((await run(byHost, "echo via-host-$((2+3))")).trim()).toBe("via-host-5");
      byHost.ws.close();
    });

    it("with a session's token (sandbox.sessions.create), as the console does", async () => {
      const session = await sandbox.sessions.create({ expiresAt: new Date(sim.deps.clock.now() + 600_000) });
      const term = await openReadyTerminal(`${wsOf(sandboxUrl)}?token=${encodeURIComponent(session.token)}`);
      expect((await run(term, "echo session-ok")).trim()).toBe("session-ok");
      term.ws.close();
      await sandbox.sessions.delete(session.name);
      await expect(openTerminal(`${wsOf(sandboxUrl)}?token=${encodeURIComponent(session.token)}`)).rejects.toMatchObject({ status: 401 });
    });

    it("401 before the upgrade without a credential or with a wrong one; ?token= opens nothing but the terminal", async () => {
      await expect(openTerminal(wsOf(sandboxUrl))).rejects.toMatchObject({ status: 401 });
      await expect(openTerminal(`${wsOf(sandboxUrl)}?token=wrong`)).rejects.toMatchObject({ status: 401 });
      expect((await fetch(`${sandboxUrl}/process?token=${KEY}`)).status).toBe(401);
      expect((await fetch(`${sandboxUrl}/terminal?token=${KEY}`)).status).toBe(200);
    });

    it("closing the socket ends the shell inside the sandbox", async () => {
      const term = await openReadyTerminal(`${wsOf(sandboxUrl)}?token=${KEY}`);
      const inside = Number((await run(term, "nohup sleep 1000 >/dev/null 2>&1 & echo $!")).trim().split("\n").pop());
      expect(inside).toBeGreaterThan(0);
      term.ws.close();
      // Seen from inside the sandbox (its own pid namespace): the sleep is gone.
      await until(
        async () => {
          const r = await sandbox.process.exec({ command: `kill -0 ${inside} 2>/dev/null && echo alive || echo gone`, waitForCompletion: true });
          return r.logs?.includes("gone");
        },
        { timeoutMs: 15_000 },
      );
    });
  });
}
