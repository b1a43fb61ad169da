import { randomBytes } from "node:crypto";
import { signJwt } from "../auth/jwt.js";
import type { Clock } from "../../src/clock.js";
import type { ExecutionRef } from "./executor.js";
import type { RunDoc } from "./run-state.js";

/** What a task's environment is made of besides the execution: the simulator's URL, the clock and the key its API key is signed with. */
export interface TaskEnvDeps {
  urls: { base: string };
  clock: Clock;
  jwtSecret: Buffer;
}

/** The task's environment: the job's envs, the execution's overrides, then what blStartJob and @blaxel/core read. */
export function taskEnv(
  deps: TaskEnvDeps,
  ref: ExecutionRef,
  execution: RunDoc & { env: Record<string, string> },
  jobEnvs: { name?: string; value?: string }[],
  index: number,
  attempt: number,
  dataUrl: string,
): Record<string, string> {
  const run = execution.__run!;
  const base = deps.urls.base;
  const iat = Math.floor(deps.clock.now() / 1000);
  const apiKey = signJwt(
    {
      iss: "sandbox-sim",
      sub: run.by.sub,
      sub_type: run.by.type,
      scope: run.by.scopes.join(" "),
      iat,
      exp: iat + 86_400,
      jti: randomBytes(12).toString("base64url"),
      workspace: ref.workspace,
    },
    deps.jwtSecret,
  );
  const fromJob = Object.fromEntries(jobEnvs.filter((e) => e.name).map((e) => [e.name!, e.value ?? ""]));
  return {
    ...fromJob,
    ...execution.env,
    BL_EXECUTION_DATA_URL: dataUrl,
    TASK_INDEX: String(index),
    TASK_COUNT: String(run.tasks.length),
    TASK_ATTEMPT: String(attempt - 1),
    BL_EXECUTION_ID: ref.execution,
    BL_NAME: ref.job,
    BL_TYPE: "job",
    BL_WORKSPACE: ref.workspace,
    BL_API_KEY: apiKey,
    BL_API_URL: `${base}/v0`,
    BL_RUN_URL: base,
    BL_DISABLE_H2: "true",
  };
}
