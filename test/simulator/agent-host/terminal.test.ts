import { agentHostSupport } from "../../../simulator/agent-host/host.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { terminalCases } from "../terminal/terminal-cases.js";

/** The terminal's cases with the agent host serving the sandbox: a PTY of the sandbox's own devpts, entered through nsexec. */
const support = agentHostSupport();
terminalCases("host", isolationUnavailable ?? (support.available ? undefined : support.reason));
