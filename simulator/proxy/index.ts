export {
  createSandboxProxy,
  type ForwardPlan,
  type PreviewRouter,
  type SandboxProxy,
  type SandboxProxyOptions,
  type Upstream,
} from "./sandbox-reverse-proxy.js";
export { edgeError, edgeErrorReply, type EdgeCode } from "./edge-errors.js";
export { isPortPath, OWN_PATHS, targetFromHost, targetFromPath, targetFromRunPath, PATH_PREFIX, type SandboxTarget } from "./route.js";
