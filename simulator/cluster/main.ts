#!/usr/bin/env node
import { parseArgs } from "node:util";
import { Cluster, type ClusterInfo } from "./cluster.js";

/**
 * `npm run cluster -- up|down|status [--name <name>] [--workers <n>] [--share <dir>]...`: a three-node swarm
 * on this machine (cluster.ts), and how to point the simulator at it.
 */
const USAGE = `usage: npm run cluster -- <up|down|status> [options]
  up        start a manager and --workers workers (Docker-in-Docker nodes), one swarm, a registry
  down      remove the cluster's nodes, their storage and network
  status    the nodes, their addresses and states, and how to use the cluster
options:
  --name <name>     the cluster's name (default sbxk-cluster)
  --workers <n>     workers beside the manager (default 2)
  --share <dir>     a host directory every node sees at the same path (repeatable; default the temp dir):
                    the simulator's --data must be under one
`;

function print(info: ClusterInfo): void {
  if (info.nodes.length === 0) return void console.log(`cluster ${info.name}: no nodes`);
  for (const n of info.nodes)
    console.log(`${n.name.padEnd(28)} ${n.role.padEnd(8)} ${n.address.padEnd(16)} ${n.state}${n.swarm ? ` (swarm: ${n.swarm})` : ""}`);
  if (info.dockerHost && info.registry) {
    console.log(`\nPoint the simulator at it:\n  DOCKER_HOST=${info.dockerHost} npm start -- --launcher swarm --swarm-registry ${info.registry}`);
  }
}

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { name: { type: "string" }, workers: { type: "string" }, share: { type: "string", multiple: true }, help: { type: "boolean" } },
  });
  const command = positionals[0];
  if (values.help || !command || !["up", "down", "status"].includes(command)) {
    process.stdout.write(USAGE);
    return values.help ? 0 : 2;
  }
  const workers = values.workers === undefined ? 2 : Number(values.workers);
  if (!Number.isInteger(workers) || workers < 0 || workers > 8) {
    process.stderr.write("cluster: --workers must be an integer from 0 to 8\n");
    return 2;
  }
  const cluster = new Cluster({ name: values.name, workers, share: values.share, log: (line) => console.error(`cluster: ${line}`) });
  if (command === "up") {
    try {
      print(await cluster.up());
    } catch (err) {
      process.stderr.write(`cluster: up failed: ${(err as Error).message}\n(what was started is removed: npm run cluster -- down)\n`);
      await cluster.down().catch(() => undefined);
      return 1;
    }
  } else if (command === "down") {
    const removed = await cluster.down();
    console.log(`removed ${removed.containers.length} nodes, ${removed.volumes.length} volumes, ${removed.networks.length} networks`);
  } else print(await cluster.status());
  return 0;
}

main().then(
  (code) => (process.exitCode = code),
  (err: Error) => {
    process.stderr.write(`cluster: ${err.message}\n`);
    process.exitCode = 1;
  },
);
