import { driveCases } from "./drive-cases.js";

// Drives with an agent in each sandbox (--agent-mode process), which mounts from inside.
driveCases("process");
