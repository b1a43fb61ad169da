import { parentPort } from "node:worker_threads";
import { packAnswer } from "./answer.js";
import { runJob, type SearchJob } from "./jobs.js";

/**
 * A search worker: walks and reads with synchronous calls (several times
 * faster than the threadpool round trips of async fs on many small files)
 * without ever blocking the agent's event loop. `cancel` is a shared flag the
 * agent sets when the client goes away.
 */
interface Request {
  id: number;
  job: SearchJob;
  cancel: SharedArrayBuffer;
}

parentPort!.on("message", ({ id, job, cancel }: Request) => {
  const flag = new Int32Array(cancel);
  try {
    parentPort!.postMessage({ id, answer: packAnswer(runJob(job, () => Atomics.load(flag, 0) !== 0)) });
  } catch (err) {
    parentPort!.postMessage({ id, error: (err as Error).message ?? String(err) });
  }
});
