/**
 * The variables that point @blaxel/core at this simulator (control-plane.md §1.6). BL_REGION is the
 * simulator's default region: with it set the SDK stops warning "'region' is not set" on every create, and
 * BL_DISABLE_H2 keeps it from tunnelling sandbox calls to the real edge because a region is set.
 */
export function sdkEnv(deps: { config: { workspace: string }; adminApiKey: string }, url: string): Record<string, string> {
  return {
    BL_API_URL: `${url}/v0`,
    BL_RUN_URL: url,
    BL_WORKSPACE: deps.config.workspace,
    BL_API_KEY: deps.adminApiKey,
    BL_REGION: "us-pdx-1",
    BL_DISABLE_H2: "true",
  };
}

const SHELL_SAFE = /^[\w@%+=:,./-]*$/;
const shellQuote = (value: string) => (SHELL_SAFE.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`);

/** `export KEY=value` lines: pasted into a POSIX shell as printed. */
export function exportLines(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `export ${k}=${shellQuote(v)}`)
    .join("\n");
}

/** `KEY=value` lines for a .env file (dotenv, `node --env-file`, docker `--env-file`). */
export function dotenvLines(env: Record<string, string>): string {
  return `${Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")}\n`;
}
