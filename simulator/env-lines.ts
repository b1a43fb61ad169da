import type { SimDeps } from "./deps.js";

/** `KEY=value` lines that point @blaxel/core at this simulator (control-plane.md §1.6). */
export function envLines(deps: SimDeps, url: string): string {
  return [
    `BL_API_URL=${url}/v0`,
    `BL_RUN_URL=${url}`,
    `BL_WORKSPACE=${deps.config.workspace}`,
    `BL_API_KEY=${deps.adminApiKey}`,
    "BL_DISABLE_H2=true",
  ].join("\n");
}
