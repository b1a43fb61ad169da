import { errors } from "../../src/errors.js";

type Claim = "complete" | "abort";

interface Live {
  inflight: number;
  claim?: Claim;
  idleWaiters: (() => void)[];
}

/**
 * In-process coordination of one upload's requests. Part uploads register
 * while they stream; complete and abort *claim* the upload, which refuses new
 * parts (409) and waits for in-flight ones, so no part can change under an
 * assembly and two completes can never both assemble.
 */
export class UploadClaims {
  readonly #live = new Map<string, Live>();

  #entry(id: string): Live {
    let live = this.#live.get(id);
    if (!live) {
      live = { inflight: 0, idleWaiters: [] };
      this.#live.set(id, live);
    }
    return live;
  }

  /** Marks a part upload as started; the returned function marks it finished. */
  beginPart(id: string): () => void {
    const live = this.#entry(id);
    if (live.claim) throw errors.conflict(`upload ${id} is being ${live.claim === "complete" ? "completed" : "aborted"}: no more parts are accepted`);
    live.inflight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      live.inflight--;
      if (live.inflight === 0) for (const wake of live.idleWaiters.splice(0)) wake();
      this.#forgetIfIdle(id, live);
    };
  }

  /** Claims the upload and waits until no part is in flight. */
  async claim(id: string, kind: Claim): Promise<void> {
    const live = this.#entry(id);
    if (live.claim) throw errors.conflict(`upload ${id} is already being ${live.claim === "complete" ? "completed" : "aborted"}`);
    live.claim = kind;
    if (live.inflight > 0) await new Promise<void>((resolve) => live.idleWaiters.push(resolve));
  }

  /** Gives a claim back (after a failed complete, so the client can retry). */
  release(id: string): void {
    const live = this.#live.get(id);
    if (!live) return;
    live.claim = undefined;
    this.#forgetIfIdle(id, live);
  }

  isBusy(id: string): boolean {
    const live = this.#live.get(id);
    return !!live && (live.inflight > 0 || !!live.claim);
  }

  #forgetIfIdle(id: string, live: Live): void {
    if (live.inflight === 0 && !live.claim) this.#live.delete(id);
  }
}
