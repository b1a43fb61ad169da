import { upgradeUnder } from "./upgrade-case.js";

// The SDK's system.upgrade() under the process launcher; see upgrade-case.ts.
upgradeUnder("process");
