import { Router, json } from "express";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import type { ProcessManager } from "../process/manager.js";
import type { PortMonitors } from "./monitor.js";
import { portsOfTree } from "../ports/sockets.js";
import { tunnelRouter } from "./tunnel.js";

const MonitorBody = z.object({
  callback: z.string().refine((u) => /^https?:\/\//i.test(u) && URL.canParse(u), "must be an http(s) URL"),
});

function pidOf(raw: string): number {
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || !Number.isSafeInteger(Number(raw))) throw errors.badRequest("invalid PID");
  return Number(raw);
}

/**
 * `/network/process/{pid}/...` (reference §9.9), and the tunnel's routes
 * (tunnel.ts: validated, then 501). Only processes the agent
 * started are looked at (their current run and its tree): any other pid has
 * no ports here, so the API cannot be used to inspect the host's processes.
 */
export function networkRouter(manager: ProcessManager, monitors: PortMonitors): Router {
  const router = Router();
  const body = json({ limit: "64kb", type: () => true });

  router.get("/process/:pid/ports", async (req, res) => {
    const pid = pidOf(req.params.pid);
    const run = manager.runOf(pid);
    res.json({ pid, ports: run?.alive ? await portsOfTree(run.runPid) : [] });
  });

  router.post("/process/:pid/monitor", body, (req, res) => {
    const pid = pidOf(req.params.pid);
    const { callback } = parse(MonitorBody, req.body ?? {}, "invalid request body: body");
    if (!manager.runOf(pid)?.alive) throw errors.notFound(`no running process with PID ${pid}`);
    monitors.start(pid, callback);
    res.json({ path: "", message: "Port monitoring started" });
  });

  router.delete("/process/:pid/monitor", (req, res) => {
    monitors.stop(pidOf(req.params.pid));
    res.json({ path: "", message: "Port monitoring stopped" });
  });

  router.use(tunnelRouter());

  return router;
}
