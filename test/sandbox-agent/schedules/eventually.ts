/** Polls `fn` until it returns a truthy value (real waits: at most `timeoutMs`). */
export async function eventually<T>(fn: () => Promise<T | undefined | false | null>, timeoutMs = 5_000, label = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${label} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
