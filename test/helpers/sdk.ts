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
