import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { parseSimConfig } from "../../../simulator/config.js";
import { LAUNCHER_NAMES } from "../../../simulator/launcher/index.js";
import { specImage, swarmName, swarmServiceArgs, workspaceNetwork } from "../../../simulator/launcher/swarm-args.js";
import { nodeGone, parseTasks } from "../../../simulator/launcher/swarm-tasks.js";
import { nodeList } from "../../../simulator/launcher/swarm-nodes.js";
import { ownerGone, ownerLabel, registryRef } from "../../../simulator/launcher/swarm.js";
import { specFor } from "./helpers.js";

/** The swarm launcher's `docker service create` argv, task and owner logic (no Docker needed; the real thing: swarm.test.ts). */
const inputs = {
  name: "sbx-ws-one-abcd",
  image: "python:3.12",
  network: "sandbox-kit-ws-1234",
  owner: "host/1/2",
  constraints: ["node.labels.pool==sbx"],
  resolveImage: false,
  stopGraceSeconds: 5,
  agentMain: "/srv/kit/dist/sandbox-agent/main.js",
  node: "/usr/bin/node",
  user: "0:0",
};

describe("swarm launcher: the service it creates", () => {
  const spec = specFor("/data", "one", { env: { API_KEY: "s3cret-value" }, memoryMb: 512 });
  const argv = swarmServiceArgs(spec, inputs);
  const values = (flag: string) => argv.flatMap((a, i) => (argv[i - 1] === flag ? [a] : []));

  it("one replica that is never restarted by the swarm, the memory limit, the constraints, labels naming the sandbox", () => {
    expect(argv.slice(0, 2)).toEqual(["service", "create"]);
    expect(values("--replicas")).toEqual(["1"]);
    expect(values("--restart-condition")).toEqual(["none"]);
    expect(values("--limit-memory")).toEqual(["512M"]);
    expect(values("--constraint")).toEqual(["node.labels.pool==sbx"]);
    expect(values("--label")).toEqual(
      expect.arrayContaining([
        `sandbox-kit.workspace=${spec.workspace}`,
        "sandbox-kit.sandbox=one",
        `sandbox-kit.data-dir=${spec.dataDir}`,
        "sandbox-kit.owner=host/1/2",
      ]),
    );
    expect(values("--network")).toEqual(["sandbox-kit-ws-1234"]);
    expect(argv).toContain("--no-resolve-image");
    expect(swarmServiceArgs(spec, { ...inputs, resolveImage: true })).not.toContain("--no-resolve-image");
  });

  it("publishes only the agent's port, on the node (mode=host), and never puts the token or env values in argv", () => {
    expect(values("--publish")).toEqual(["mode=host,target=8080,protocol=tcp"]);
    expect(argv.join(" ")).not.toContain(spec.token);
    expect(argv.join(" ")).not.toContain("s3cret-value");
    // The variables are handed over in a file (docker-args.ts ENV_HANDOFF), never kept in the service's spec.
    expect(values("--env")).toEqual([]);
    expect(argv).not.toContain("--workdir");
    expect(argv.slice(-2)).toEqual(["/run/sandbox-agent/token.handoff", "--token-file-remove"]);
    expect(values("--mount")).toContain("type=bind,source=/srv/kit/dist,target=/opt/sandbox-kit/dist,readonly");
  });

  it("names: Docker's alphabet, at most 63, distinct per workspace", () => {
    const long = swarmName("sbx", "w".repeat(60), "Sandbox_Name!");
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/);
    expect(workspaceNetwork("a-b")).not.toBe(workspaceNetwork("a_b"));
    expect(specImage({}, "fallback")).toBe("fallback");
  });

  it("a registry's copy of an image drops the source's registry host", () => {
    expect(registryRef("127.0.0.1:5000", "sandbox-kit-test/node20:bookworm")).toBe("127.0.0.1:5000/sandbox-kit-test/node20:bookworm");
    expect(registryRef("reg.local:5000/", "ghcr.io/blaxel-ai/sandbox:latest")).toBe("reg.local:5000/blaxel-ai/sandbox:latest");
    expect(registryRef("reg:5000", "debian")).toBe("reg:5000/debian");
  });

  it("an owner is gone once its process is (same host only); a task's node that left or is down ends it", () => {
    expect(ownerGone(ownerLabel())).toBe(false);
    expect(ownerGone(`${hostname()}/${process.pid}/1`)).toBe(true); // the pid was reused by another process
    expect(ownerGone(`${hostname()}/999999999/1`)).toBe(true);
    expect(ownerGone("another-host/999999999/1")).toBe(false);
    const nodes = new Map([
      ["n1", { id: "n1", hostname: "worker", state: "down", addr: "10.0.0.2" }],
      ["n2", { id: "n2", hostname: "mgr", state: "ready", addr: "10.0.0.1" }],
    ]);
    expect(nodeGone("n1", nodes)).toBe("its node worker (n1) is down");
    expect(nodeGone("n3", nodes)).toBe("its node n3 left the swarm");
    expect(nodeGone("n2", nodes)).toBeUndefined();
    const [task] = parseTasks(
      JSON.stringify([{ ID: "t", NodeID: "n2", Status: { State: "running", PortStatus: { Ports: [{ TargetPort: 8080, PublishedPort: 30001 }] } } }]),
      8080,
    );
    expect(task).toEqual({ id: "t", state: "running", err: undefined, nodeId: "n2", exitCode: undefined, publishedPort: 30001 });
  });

  it("is selected by --launcher swarm, with --swarm-constraint (repeatable) and --swarm-registry", () => {
    expect(LAUNCHER_NAMES).toContain("swarm");
    const config = parseSimConfig(
      ["--launcher", "swarm", "--swarm-constraint", "node.role==worker", "--swarm-constraint", "node.labels.pool!=gpu", "--swarm-registry", "127.0.0.1:5000"],
      {},
    );
    expect(config !== "help" && [config.launcher, config.swarmConstraints, config.swarmRegistry]).toEqual([
      "swarm",
      ["node.role==worker", "node.labels.pool!=gpu"],
      "127.0.0.1:5000",
    ]);
    expect(() => parseSimConfig(["--swarm-constraint", "anywhere"], {})).toThrow(/--swarm-constraint/);
    expect(() => parseSimConfig(["--swarm-registry", "http://x"], {})).toThrow(/--swarm-registry/);
  });

  it("/health's nodes say whether the simulator reaches each node's own engine, and why not", () => {
    const nodes = new Map([
      ["m", { id: "m", hostname: "manager", state: "ready", addr: "10.0.0.1", role: "manager" }],
      ["w1", { id: "w1", hostname: "worker-1", state: "ready", addr: "10.0.0.2", role: "worker", engine: "tcp://10.0.0.2:2375" }],
      ["w2", { id: "w2", hostname: "worker-2", state: "down", addr: "10.0.0.3", role: "worker" }],
    ]);
    const list = nodeList(nodes, new Map([["task", "w1"]]), "m");
    expect(list.map((n) => [n.name, n.sandboxes, n.engine?.reachable])).toEqual([
      ["manager", 0, true],
      ["worker-1", 1, true],
      ["worker-2", 0, false],
    ]);
    expect(list[2]!.engine).toMatchObject({ why: expect.stringMatching(/no sandbox-kit.engine label: its sandboxes never go to standby/) });
  });
});
