/** Bounded waits: a shutdown must not hang on one thing that does not end. */

/** Waits for the promises to settle, at most `ms`; returns how many had not. */
export async function settledWithin(promises: (Promise<unknown> | undefined)[], ms: number): Promise<number> {
  let pending = 0;
  const all = promises.map((p) => {
    pending++;
    return Promise.resolve(p).then(
      () => void pending--,
      () => void pending--,
    );
  });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(all), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
  return pending;
}
