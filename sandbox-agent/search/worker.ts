import { parentPort } from "node:worker_threads";
import { runShares, type SharedWalk } from "./answer.js";
import type { SearchJob } from "./jobs.js";

/**
 * A search worker: walks and reads with synchronous calls (several times
 * faster than the threadpool round trips of async fs on many small files)
 * without ever blocking the agent's event loop. `cancel` is a shared flag the
 * agent sets when the client goes away; `walk`, the shares of a walk several
 * workers take part in.
 */
interface Request {
  id: number;
  job: SearchJob;
  walk?: SharedWalk;
  cancel: SharedArrayBuffer;
}

parentPort!.on("message", ({ id, job, walk, cancel }: Request) => {
  const flag = new Int32Array(cancel);
  try {
    parentPort!.postMessage({ id, answers: runShares(job, walk, () => Atomics.load(flag, 0) !== 0) });
  } catch (err) {
    parentPort!.postMessage({ id, error: (err as Error).message ?? String(err) });
  }
});
