import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/clock.js";
import { silentLogger } from "../../../src/logging.js";
import { migrate, openDatabase } from "../../../src/sqlite.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { ProcessManager } from "../../../sandbox-agent/process/manager.js";
import { cgroupProcsOf, namespaceSpawner, nsexecPath } from "../../../sandbox-agent/process/ns-spawn.js";
import { PROCESS_MIGRATIONS } from "../../../sandbox-agent/process/process-store.js";
import { BwrapLauncher, type AgentHandle } from "../../../simulator/launcher/index.js";
import { COMMAND_CAPABILITIES } from "../../../simulator/launcher/sandbox-kit.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { exec, specFor, tempBase } from "./helpers.js";

/**
 * A command entered from outside a sandbox of the default launcher (nsexec into the namespaces of its PID 1,
 * its memory cgroup, COMMAND_CAPABILITIES) is indistinguishable from one its own agent starts inside: the same
 * namespaces, uid and gid maps (every id of the simulator's block), capability sets, cgroup, root and hostname.
 */
const SKIP = isolationUnavailable ?? (nsexecPath() ? undefined : "native/nsexec is not built (no C compiler): run npm run build");
const PROBE = [
  ...["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"].map((ns) => `readlink /proc/self/ns/${ns}`),
  "cat /proc/self/uid_map /proc/self/gid_map",
  "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status",
  "cat /proc/self/cgroup",
  "id -u; id -g; hostname; pwd; cat /marker.txt; ls /",
].join("; ");

describe.skipIf(SKIP !== undefined)(`commands entered into a bwrap launcher's sandbox${SKIP ? ` [SKIPPED: ${SKIP}]` : ""}`, () => {
  const base = tempBase("ns-enter-");
  const launcher = SKIP ? undefined : new BwrapLauncher({ network: "none" });
  const running: AgentHandle[] = [];
  afterAll(async () => {
    await Promise.all(running.map((h) => h.stop(2_000)));
    await launcher?.close?.();
  });

  it("run as the sandbox's own agent runs them: same namespaces, id maps, capabilities, cgroup and root", async () => {
    const spec = specFor(base, "entered", { drivesDir: join(base, "drives"), memoryMb: 512 });
    const agent = await launcher!.start(spec);
    running.push(agent);
    writeFileSync(join(spec.rootDir, "marker.txt"), "the sandbox's own layer");
    const inside = await exec(agent, spec.token, PROBE);

    const dir = tempBase("ns-enter-manager-");
    const db = openDatabase(join(dir, "agent.db"));
    migrate(db, PROCESS_MIGRATIONS);
    const pid1 = agent.sandboxPid!;
    const manager = new ProcessManager({
      db,
      paths: new SandboxPaths(spec.rootDir),
      clock: systemClock,
      logger: silentLogger(),
      logDir: join(dir, "logs"),
      logMaxBytes: 64 * 1024,
      stopGraceMs: 1_000,
      maxFinished: 10,
      baseEnv: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
      spawner: namespaceSpawner(() => ({ pid: pid1, capabilities: COMMAND_CAPABILITIES, cgroupProcs: cgroupProcsOf(pid1) })),
    });
    try {
      const started = await manager.start({ command: PROBE });
      const ended = await manager.waitForExit(started.pid);
      const { stdout } = await manager.logs(started.pid);
      expect(ended.status).toBe("completed");
      expect(stdout).toBe(inside.stdout);
      expect(stdout).toContain("the sandbox's own layer");
    } finally {
      manager.close();
      db.close();
    }
  });
});
