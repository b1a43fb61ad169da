import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";

/**
 * The agent's zod parses without generated code (sandbox-agent/zod-jitless.ts): zod reads the setting when a
 * schema is built, so both of the agent's entry points must import it before any module that builds schemas.
 */
const root = resolve(import.meta.dirname, "../..");
const firstImport = (file: string) => /^import\s[^;]*;/m.exec(readFileSync(resolve(root, file), "utf8"))?.[0];

describe("the agent's zod", () => {
  it("is set to parse without generated code once the module is loaded", async () => {
    await import("../../sandbox-agent/zod-jitless.js");
    expect(z.config().jitless).toBe(true);
    // Still a parser that reports what is wrong, as the agent's routes need.
    const parsed = z.object({ command: z.string() }).safeParse({ command: 1 });
    expect(parsed.success).toBe(false);
  });

  it("is the first import of both entry points (the cold agent's main and the warm agent)", () => {
    expect(firstImport("sandbox-agent/main.ts")).toBe('import "./zod-jitless.js";');
    expect(firstImport("simulator/launcher/warm-agent.ts")).toBe('import "../../sandbox-agent/zod-jitless.js";');
  });
});
