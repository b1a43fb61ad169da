export { createSandboxProxy, type SandboxProxy, type SandboxProxyOptions, type Upstream } from "./proxy.js";
export { targetFromHost, targetFromPath, PATH_PREFIX, type SandboxTarget } from "./route.js";
