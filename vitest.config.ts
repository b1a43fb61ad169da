import { defineConfig } from "vitest/config";

// The machine has 2 cores: at most 2 workers, and forks so native addons
// (better-sqlite3) and child processes behave as they do in production.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/helpers/setup.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
