/**
 * Quick start: the unmodified @blaxel/core SDK against sandbox-sim.
 *
 *   npm run build
 *   npm start                      # in one terminal; copy the KEY=value lines it prints
 *   env $(the lines) node dist/examples/quickstart.js
 *
 * or, with no simulator running, `node dist/examples/quickstart.js --self` starts one in-process
 * (startSimulator) and stops it at the end. The tests run it that way.
 */
import { randomBytes, createHash } from "node:crypto";
import { startSimulator } from "../index.js";

const MiB = 1024 * 1024;
const log = (line: string) => process.stdout.write(`${line}\n`);

async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function quickstart(): Promise<void> {
  const { SandboxInstance, DriveInstance } = await import("@blaxel/core");
  const name = `quickstart-${randomBytes(3).toString("hex")}`;
  const driveName = `${name}-drive`;

  // 1. Create a sandbox: the simulator starts a real sandbox-agent and answers once it is healthy.
  const sandbox = await SandboxInstance.create({ name, envs: [{ name: "GREETING", value: "hello" }] });
  log(`created ${sandbox.metadata.name} (${sandbox.status}) at ${sandbox.metadata.url}`);
  try {
    // 2. Write a 20 MiB file (the SDK uses multipart uploads above 5 MiB) and read it back.
    const data = randomBytes(20 * MiB);
    await sandbox.fs.writeBinary("/work/blob.bin", data);
    const back = Buffer.from(await (await sandbox.fs.readBinary("/work/blob.bin")).arrayBuffer());
    const same = createHash("sha256").update(back).digest("hex") === createHash("sha256").update(data).digest("hex");
    if (!same) throw new Error("the 20 MiB file read back differs");
    log(`wrote and read back ${back.length} bytes, identical`);

    // 3. Run a command.
    const run = await sandbox.process.exec({ command: "echo $GREETING from $(wc -c < work/blob.bin) bytes", waitForCompletion: true });
    log(`exec: ${(run.logs ?? "").trim()} (exit ${run.exitCode})`);

    // 4. A sleep schedule: the sandbox's agent keeps it and runs it in real time, one second from now
    //    (the control plane has no "run now"; a short sleep is the honest way to see an execution quickly).
    const schedule = await sandbox.schedules.create({ type: "sleep", value: "1s", input: { command: "echo scheduled > work/scheduled.txt" } });
    const execution = await until("the schedule's execution to end", async () => {
      const page = await sandbox.schedules.executions();
      const found = (page.data as { scheduleId?: string; status?: string }[]).find((e) => e.scheduleId === schedule.id);
      return found && found.status !== "running" ? found : undefined; // listed as soon as it starts
    });
    const ran = await until(
      "the scheduled command's output",
      async () => (await sandbox.fs.read("/work/scheduled.txt").catch(() => undefined))?.trim() || undefined,
    );
    log(`schedule ${schedule.id} (${schedule.type} ${schedule.value}) executed: ${execution.status}, wrote "${ran}"`);

    // 5. A drive: a control-plane resource (a directory in the simulator's drives dir), mounted through the sandbox's agent.
    await DriveInstance.create({ name: driveName });
    await sandbox.drives.mount({ driveName, mountPath: "/mnt/shared" });
    await sandbox.fs.write("/mnt/shared/hello.txt", "on the drive");
    log(
      `drive mounted: ${JSON.stringify((await sandbox.drives.list()).map?.((d: { driveName?: string; mountPath?: string }) => `${d.driveName}→${d.mountPath}`) ?? [])}`,
    );
    await sandbox.drives.unmount("/mnt/shared");
    await DriveInstance.delete(driveName);
  } finally {
    // 6. Clean up: delete stops the agent and removes its files.
    await SandboxInstance.delete(name);
    log(`deleted ${name}`);
  }
}

async function main(): Promise<void> {
  if (!process.argv.includes("--self")) return quickstart();
  // The host's system as the image (fast); without imageSource the sandbox runs blaxel/base-image, built once.
  const sim = await startSimulator({ imageSource: "host" });
  Object.assign(process.env, sim.env);
  try {
    await quickstart();
  } finally {
    await sim.stop();
  }
}

// Run when executed directly (not when imported by the test).
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop()!)) {
  main().catch((err) => {
    process.stderr.write(`quickstart failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
