import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, parseAgentConfig } from "../../../sandbox-agent/config.js";
import { tempDir } from "../../helpers/agent.js";

/** The token can come from a file or a descriptor, never needing env or argv. */
describe("token sources", () => {
  it("reads --token-file's first line, and --token-file-remove deletes the hand-off", () => {
    const file = join(tempDir(), "token");
    writeFileSync(file, "from-file\nignored\n", { mode: 0o600 });
    const config = parseAgentConfig(["--token-file", file, "--token-file-remove"], {});
    expect(config !== "help" && config.token).toBe("from-file");
    expect(existsSync(file)).toBe(false);
  });
  it("refuses an empty or unreadable token file, and both sources at once", () => {
    const file = join(tempDir(), "empty");
    writeFileSync(file, "\n");
    expect(() => parseAgentConfig(["--token-file", file], {})).toThrow(ConfigError);
    expect(() => parseAgentConfig(["--token-file", "/nonexistent/token"], {})).toThrow(/--token-file \/nonexistent\/token: no such file/);
    expect(() => parseAgentConfig(["--token-file", file, "--token-fd", "3"], {})).toThrow(/give one of them/);
    expect(() => parseAgentConfig(["--token-fd", "1"], {})).toThrow(/3 or more/);
  });
});
