import type { Request, Response } from "express";
import { secretsEqual } from "../../src/auth.js";
import { errors } from "../../src/errors.js";
import type { RunRecord } from "./run-state.js";
import type { ResourceStore } from "../store/resources.js";

/**
 * GET /job-data/{workspace}/{job}/{execution}/{token}: an execution's task
 * data, `{tasks: [...]}`, what blStartJob fetches from BL_EXECUTION_DATA_URL
 * (without credentials, as on the platform) and indexes by TASK_INDEX. The
 * token is the execution's own secret, given only to its tasks.
 */
export function jobDataHandler(deps: { resources: ResourceStore }) {
  return (req: Request, res: Response) => {
    const { workspace, job, execution, token } = req.params as Record<string, string>;
    const item = deps.resources.get<{ taskInputs: unknown[]; __run?: RunRecord }>(workspace!, "job-execution", execution!, job!);
    const run = item?.doc.__run;
    if (!item || !run || !secretsEqual(token ?? "", run.dataToken)) throw errors.notFound("no such execution data");
    res.json({ tasks: item.doc.taskInputs });
  };
}
