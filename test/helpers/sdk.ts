/**
 * @blaxel/core reads its settings (credentials, workspace, H2) from the
 * environment on first use, so tests set the environment before importing it,
 * and then build SandboxInstances whose metadata.url points at a local agent.
 */
export async function loadSdk(env: { apiKey?: string; workspace?: string } = {}) {
  process.env.BL_DISABLE_H2 = "true";
  process.env.BL_WORKSPACE = env.workspace ?? "test";
  process.env.BL_API_KEY = env.apiKey ?? "unused";
  process.env.BL_REGION ??= "local";
  return import("@blaxel/core");
}

/** A sandbox handle for an agent that is reachable at `url`, as the control plane would return it. */
export async function sandboxAt(url: string, name = "local", env: { apiKey?: string } = {}) {
  const { SandboxInstance } = await loadSdk(env);
  // The SDK's own type for the control-plane model is wide; metadata is all the sandbox-local calls need.
  return new SandboxInstance({ metadata: { name, url }, spec: {} } as ConstructorParameters<typeof SandboxInstance>[0]);
}

/** Points @blaxel/core at a running simulator (the env lines it prints) and imports it. */
export async function sdkForSimulator(simEnv: Record<string, string>) {
  for (const [k, v] of Object.entries(simEnv)) process.env[k] = v;
  process.env.BL_REGION = "us-pdx-1"; // silences the SDK's "region not set" warning
  delete process.env.BL_CLIENT_CREDENTIALS;
  delete process.env.BL_API_VERSION;
  return import("@blaxel/core");
}
