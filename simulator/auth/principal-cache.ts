/**
 * Resolved principals (auth/principal.ts, the type parameter: this file does not import it back) by bearer token, so a hot credential costs one map
 * lookup instead of three queries. Any change to accounts, workspaces,
 * memberships or credentials bumps the generation and empties the cache;
 * an entry also dies at its credential's own expiry (simulator clock).
 */
const MAX_ENTRIES = 10_000;

export class PrincipalCache<P> {
  #generation = 0;
  readonly #entries = new Map<string, { principal: P; generation: number; validUntilMs: number }>();

  invalidate(): void {
    this.#generation++;
    this.#entries.clear();
  }

  get(token: string, nowMs: number): P | undefined {
    const entry = this.#entries.get(token);
    if (!entry) return undefined;
    if (entry.generation !== this.#generation || entry.validUntilMs <= nowMs) {
      this.#entries.delete(token);
      return undefined;
    }
    return entry.principal;
  }

  set(token: string, principal: P, validUntilMs: number): void {
    if (this.#entries.size >= MAX_ENTRIES) this.#entries.clear();
    this.#entries.set(token, { principal, generation: this.#generation, validUntilMs });
  }
}
