import { driveCases } from "./drive-cases.js";

// Drives under the default agent mode (auto: the agent host where it can run, as here).
driveCases("auto");
