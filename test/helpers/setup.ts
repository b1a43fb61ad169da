import { afterAll } from "vitest";
import { removeTrackedTempDirs } from "./temp-dirs.js";

// Registered first, so it runs after every afterAll of the test file itself (hooks unwind as a stack).
afterAll(removeTrackedTempDirs);
