import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BwrapLauncher, type AgentHandle, type LaunchSpec } from "../../../simulator/launcher/index.js";
import { agentFetch } from "../../../simulator/launcher/endpoint.js";
import { cmdlineOf, descendantsOf, isAlive, stateOf } from "../../../simulator/launcher/proc.js";
import { isolationUnavailable, pidNamespaceOf, pidsInNamespace } from "../../helpers/sandbox-procs.js";
import { eventually, exec, specFor, tempBase } from "./helpers.js";

/** The capability mask of Docker's default set (sandbox-kit.ts COMMAND_CAPABILITIES). */
const CONTAINER_CAPS = "00000000a80425fb";

/**
 * The isolating launcher (the simulator's default), checked with real
 * processes: its own root, processes, hostname, a container's capabilities for commands,
 * the image as a shared read-only overlay under each sandbox's own layer, a
 * tiny image without Node, volume mounts, and its end taking everything with it.
 */
describe.skipIf(isolationUnavailable !== undefined)("bwrap launcher (isolated)", () => {
  const base = tempBase("bwrap-");
  const running: AgentHandle[] = [];
  const launcher = isolationUnavailable ? undefined : new BwrapLauncher({ network: "none" });
  afterAll(async () => {
    await Promise.all(running.map((h) => h.stop(2_000)));
  });

  async function start(name: string, extra: Partial<LaunchSpec> = {}) {
    const spec = specFor(base, name, { drivesDir: join(base, "drives"), ...extra });
    const agent = await launcher!.start(spec);
    running.push(agent);
    return { spec, agent };
  }

  it("answers on a Unix socket in its data dir: no host port", async () => {
    const { spec, agent } = await start("sock");
    expect(agent.socketPath).toBe(join(spec.dataDir, "agent.sock"));
    const health = await agentFetch(agent, { path: "/health" });
    expect(health.status).toBe(200);
  });

  it("runs the agent with the sandbox's directory as / and the host's system read-only", async () => {
    const { spec, agent } = await start("iso-a");
    writeFileSync(join(spec.rootDir, "marker.txt"), "in a");
    const ls = await exec(
      agent,
      spec.token,
      "cat /marker.txt; ls /; test -w /usr && echo usr-writable || echo usr-readonly; hostname; pwd; echo x > /tmp/f && cat /tmp/f",
    );
    expect(ls.stdout).toContain("in a");
    expect(ls.stdout).toContain("usr-readonly");
    expect(ls.stdout).not.toMatch(/^home$/m); // the host's own top-level directories are not there
    expect(ls.stdout).toMatch(/^iso-a$/m);
    expect(readFileSync(join(spec.rootDir, "tmp", "f"), "utf8")).toBe("x\n"); // /tmp is the sandbox's own
    // The agent's API sees the same `/`.
    const res = await agentFetch(agent, { path: "/filesystem/marker.txt", headers: { authorization: `Bearer ${spec.token}` } });
    expect(JSON.parse(res.text).content).toBe("in a");
  });

  it("commands get a container's default capabilities of their own user namespace, never CAP_SYS_ADMIN (no mounts), none inheritable", async () => {
    const { spec, agent } = await start("caps");
    const status = await exec(agent, spec.token, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status");
    // Docker's default set (chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap, net_bind_service,
    // net_raw, sys_chroot, mknod, audit_write, setfcap): what chown, tar -p, useradd and su need, as on a machine.
    expect(status.stdout).toBe(
      `CapInh:\t0000000000000000\nCapPrm:\t${CONTAINER_CAPS}\nCapEff:\t${CONTAINER_CAPS}\nCapBnd:\t${CONTAINER_CAPS}\nCapAmb:\t0000000000000000\n`,
    );
    expect(BigInt(`0x${CONTAINER_CAPS}`) & (1n << 21n)).toBe(0n); // CAP_SYS_ADMIN
    const mount = await exec(agent, spec.token, "mkdir -p /a /b && mount --bind /a /b 2>&1; echo rc=$?");
    expect(mount.stdout).not.toContain("rc=0");
    // Host view: the process is in a user namespace other than the host's.
    const pid = Number((await exec(agent, spec.token, "echo $$")).stdout.trim());
    expect(pid).toBeGreaterThan(0);
    expect(readFileSync(`/proc/${agent.sandboxPid}/status`, "utf8")).toMatch(/^NSpid:\s+\d+\s+1$/m);
  });

  it("one sandbox cannot see another sandbox's files or processes", async () => {
    const a = await start("iso-b");
    const b = await start("iso-c");
    writeFileSync(join(b.spec.rootDir, "secret-of-c.txt"), "c only");
    await exec(b.agent, b.spec.token, "sleep 300 & echo started");
    expect((await exec(a.agent, a.spec.token, "ls -a /")).stdout).not.toContain("secret-of-c.txt");
    expect((await exec(a.agent, a.spec.token, `cat ${b.spec.rootDir}/secret-of-c.txt 2>/dev/null || echo absent`)).stdout.trim()).toBe("absent");
    // [3] keeps grep's own command line from matching.
    const count = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c 'sleep [3]00'";
    expect((await exec(a.agent, a.spec.token, count)).stdout.trim()).toBe("0");
    expect((await exec(b.agent, b.spec.token, count)).stdout.trim()).toBe("1");
    expect(pidNamespaceOf(a.agent.sandboxPid!)).not.toBe(pidNamespaceOf(b.agent.sandboxPid!));
  });

  it("an image is a shared read-only lower layer: each sandbox writes its own copy, the base never changes", async () => {
    const image = join(base, "image");
    mkdirSync(join(image, "usr/local/bin"), { recursive: true });
    mkdirSync(join(image, "etc"), { recursive: true });
    writeFileSync(join(image, "etc/os-release"), "ID=test-image\n");
    // A tiny image: /bin/sh and the C library only, no Node: the agent runs from the kit.
    for (const [from, to] of [
      ["/bin/sh", "bin/sh"],
      ["/bin/cat", "bin/cat"],
      ["/bin/ls", "bin/ls"],
    ] as const) {
      mkdirSync(join(image, to, ".."), { recursive: true });
      copyFileSync(from, join(image, to));
    }
    for (const lib of [
      "/lib/x86_64-linux-gnu/libc.so.6",
      "/lib/x86_64-linux-gnu/libselinux.so.1",
      "/lib/x86_64-linux-gnu/libpcre2-8.so.0",
      "/lib64/ld-linux-x86-64.so.2",
    ]) {
      if (!existsSync(lib)) continue;
      mkdirSync(join(image, lib, ".."), { recursive: true });
      copyFileSync(lib, join(image, lib));
    }
    const one = await start("img-1", { imageRootDir: image });
    const two = await start("img-2", { imageRootDir: image });
    expect((await exec(one.agent, one.spec.token, "cat /etc/os-release")).stdout).toBe("ID=test-image\n");
    await exec(one.agent, one.spec.token, "echo tool > /usr/local/bin/tool; echo changed > /etc/os-release");
    expect((await exec(one.agent, one.spec.token, "cat /usr/local/bin/tool /etc/os-release")).stdout).toBe("tool\nchanged\n");
    expect((await exec(two.agent, two.spec.token, "cat /usr/local/bin/tool 2>/dev/null || echo none; cat /etc/os-release")).stdout).toBe(
      "none\nID=test-image\n",
    );
    expect(existsSync(join(image, "usr/local/bin/tool"))).toBe(false);
    expect(readFileSync(join(image, "etc/os-release"), "utf8")).toBe("ID=test-image\n");
    expect(readFileSync(join(one.spec.rootDir, "usr/local/bin/tool"), "utf8")).toBe("tool\n"); // the sandbox's own layer
    // The filesystem API reads the merged view too.
    const res = await agentFetch(two.agent, { path: "/filesystem/etc/os-release", headers: { authorization: `Bearer ${two.spec.token}` } });
    expect(JSON.parse(res.text).content).toBe("ID=test-image\n");
  });

  it("mounts (spec.volumes) appear at their targets, read-only when asked", async () => {
    const shared = join(base, "volume");
    mkdirSync(shared, { recursive: true });
    writeFileSync(join(shared, "from-host.txt"), "vol");
    const { spec, agent } = await start("vols", {
      mounts: [
        { source: shared, target: "/data", readOnly: false },
        { source: shared, target: "/ro", readOnly: true },
      ],
    });
    expect(
      (
        await exec(
          agent,
          spec.token,
          "cat /data/from-host.txt; echo; echo w > /data/written.txt; echo w > /ro/x 2>/dev/null && echo ro-writable || echo ro-refused",
        )
      ).stdout,
    ).toBe("vol\nro-refused\n");
    expect(readFileSync(join(shared, "written.txt"), "utf8")).toBe("w\n");
  });

  it("stop delivers SIGTERM to the agent inside: it exits cleanly and its whole PID namespace is gone", async () => {
    const { spec, agent } = await start("iso-stop");
    await exec(agent, spec.token, "sleep 300 & echo started");
    const ns = pidNamespaceOf(agent.sandboxPid!)!;
    expect(pidsInNamespace(ns).length).toBeGreaterThanOrEqual(3);
    const exit = await agent.stop(5_000);
    expect(exit.code).toBe(0);
    expect(isAlive(agent.pid!)).toBe(false);
    // The kernel kills the rest of the namespace when its init ends; reaping takes a moment.
    await eventually(() => pidsInNamespace(ns).length === 0);
    expect(existsSync(join(spec.dataDir, "launcher.pid"))).toBe(false);
  });
});

describe.skipIf(isolationUnavailable !== undefined)("bwrap launcher warm sandboxes", () => {
  it("a warm agent starts with the NODE_EXTRA_CA_CERTS a cold one gets (Node reads it at start-up only)", async () => {
    const base = tempBase("bwrap-warm-ca-");
    const launcher = new BwrapLauncher({ network: "none", warm: 1 });
    const handles: AgentHandle[] = [];
    const agentEnvOf = (handle: AgentHandle) => {
      const agent = descendantsOf(handle.pid!).find((pid) => cmdlineOf(pid).some((arg) => /(warm-agent|sandbox-agent\/main)\.js$/.test(arg)));
      const environ = readFileSync(`/proc/${agent}/environ`, "utf8").split("\0");
      return { warm: cmdlineOf(agent!).some((arg) => arg.endsWith("warm-agent.js")), ca: environ.find((v) => v.startsWith("NODE_EXTRA_CA_CERTS=")) };
    };
    try {
      const env = { NODE_EXTRA_CA_CERTS: "/etc/ssl/certs/ca-certificates.crt" };
      for (const [name, extra] of [
        ["own-ca", { env }],
        ["host-ca", {}], // the host's extra CAs (caEnv), where it has some
      ] as const) {
        handles.push(await launcher.start(specFor(join(base, "ws"), `cold-${name}`, { drivesDir: join(base, "drives"), ...extra })));
        await launcher.warmed();
        handles.push(await launcher.start(specFor(join(base, "ws"), `warm-${name}`, { drivesDir: join(base, "drives"), ...extra })));
        const [cold, warm] = handles.slice(-2).map(agentEnvOf);
        expect([cold!.warm, warm!.warm]).toEqual([false, true]);
        expect(warm!.ca).toBe(cold!.ca);
        if (name === "own-ca") expect(warm!.ca).toBe(`NODE_EXTRA_CA_CERTS=${env.NODE_EXTRA_CA_CERTS}`);
      }
    } finally {
      await Promise.all(handles.map((h) => h.stop(2_000)));
      await launcher.close();
    }
  });

  it("a fresh sandbox takes over a warm one: its own name, env, directories, socket and isolation", async () => {
    const base = tempBase("bwrap-warm-");
    const launcher = new BwrapLauncher({ network: "none", warm: 1 });
    const handles: AgentHandle[] = [];
    try {
      handles.push(await launcher.start(specFor(join(base, "ws"), "first", { drivesDir: join(base, "drives") })));
      await launcher.warmed();
      const warmDirs = readdirSync(join(base, "ws", ".warm"));
      expect(warmDirs).toHaveLength(1);
      const spec = specFor(join(base, "ws"), "second", { env: { GREETING: "from-warm" }, drivesDir: join(base, "drives") });
      const agent = await launcher.start(spec);
      handles.push(agent);
      expect(existsSync(join(base, "ws", ".warm", warmDirs[0]!, "root"))).toBe(false); // taken over: renamed into place
      expect(agent.socketPath).toBe(join(spec.dataDir, "agent.sock"));
      const out = await exec(agent, spec.token, "hostname; echo $GREETING; echo made > /here.txt; grep CapEff /proc/self/status");
      expect(out.stdout).toBe(`second\nfrom-warm\nCapEff:\t${CONTAINER_CAPS}\n`);
      expect(readFileSync(join(spec.rootDir, "here.txt"), "utf8")).toBe("made\n");
      const ns = pidNamespaceOf(agent.sandboxPid!)!;
      expect(ns).not.toBe(pidNamespaceOf(handles[0]!.sandboxPid!));
      await agent.stop(2_000);
      await eventually(() => pidsInNamespace(ns).length === 0);
    } finally {
      await Promise.all(handles.map((h) => h.stop(2_000)));
      await launcher.close();
    }
  });
});

/** Live (not zombie) processes whose command line mentions `text`. */
function processesMentioning(text: string): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => cmdlineOf(pid).some((arg) => arg.includes(text)) && !["Z", "X", undefined].includes(stateOf(pid)));
}

describe.skipIf(isolationUnavailable !== undefined)("bwrap launcher warm sandboxes that fail to activate", () => {
  it("a warm sandbox taken by a start that fails before its agent is adopted is killed, not left behind", async () => {
    const base = tempBase("bwrap-warm-fail-");
    const launcher = new BwrapLauncher({ network: "none", warm: 1 });
    try {
      launcher.prepare(specFor(join(base, "ws"), "prepared", { drivesDir: join(base, "drives") }));
      await launcher.warmed();
      const [pid] = launcher.warmPool().pids;
      expect(pid && isAlive(pid)).toBe(true);
      // bwrap, its namespace's init, the warm agent: all of them, by pid.
      const tree = [pid!, ...descendantsOf(pid!)];
      expect(tree.length).toBeGreaterThan(2);
      // The sandbox's directory cannot be made (a file stands where it goes): the take-over's rename fails.
      writeFileSync(join(base, "ws", "blocked"), "not a directory");
      await expect(launcher.start(specFor(join(base, "ws"), "blocked", { drivesDir: join(base, "drives") }))).rejects.toThrow();
      await eventually(() => tree.every((p) => !isAlive(p)));
      expect(tree.filter((p) => isAlive(p))).toEqual([]);
      // The failed start refilled the pool: closing now stops that warm sandbox while it is still being set up.
      expect(launcher.warmPool().idle).toBe(1);
    } finally {
      await launcher.close();
    }
    // Nothing of either warm sandbox is left, even reparented away (bwrap's argv names the sandbox's directories).
    await eventually(() => processesMentioning(base).length === 0);
  });
});

describe.skipIf(isolationUnavailable !== undefined)("bwrap launcher memory limit", () => {
  const launcher = isolationUnavailable ? undefined : new BwrapLauncher({ network: "none" });
  const why = launcher?.memory.unavailable;
  if (why) console.warn(`memory limit test skipped: ${why}`);
  it.skipIf(why !== undefined)("a process allocating past spec.runtime.memory is OOM-killed and reported so", async () => {
    const base = tempBase("bwrap-mem-");
    const spec = specFor(base, "mem", { memoryMb: 256 });
    const agent = await launcher!.start(spec);
    try {
      const grow = 'exec $(command -v node || echo /opt/sandbox-kit/bin/node) -e "const a = []; for (;;) a.push(Buffer.alloc(8 << 20).fill(1))"';
      const res = await agentFetch(agent, {
        method: "POST",
        path: "/process",
        headers: { authorization: `Bearer ${spec.token}`, "content-type": "application/json" },
        body: JSON.stringify({ command: grow, waitForCompletion: true }),
      });
      const body = JSON.parse(res.text);
      expect(body.status).toBe("failed");
      expect(body.error).toMatch(/OOM killer/);
      // The agent survived it.
      expect((await agentFetch(agent, { path: "/health" })).status).toBe(200);
    } finally {
      await agent.stop(2_000);
    }
  });
});
