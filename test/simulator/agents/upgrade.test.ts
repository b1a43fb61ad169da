import { upgradeUnder } from "./upgrade-case.js";

// The SDK's system.upgrade() under the default (isolating) launcher; see upgrade-case.ts.
upgradeUnder("default");
