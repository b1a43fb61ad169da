/** A sandbox cannot be launched here (a tool missing, isolation impossible); its own file so gateway.ts can throw it without importing types.ts, which names gateway.ts's spec. */
export class LaunchError extends Error {}
