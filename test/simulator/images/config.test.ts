import { describe, expect, it } from "vitest";
import { ConfigError, parseSimConfig, type SimConfig } from "../../../simulator/config.js";

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseSimConfig(argv, env) as SimConfig;

describe("image options", () => {
  it("--image-source and --image-cache, with their environment fallbacks and defaults", () => {
    expect(parse([])).toMatchObject({ imageSource: "store", imageCache: undefined });
    expect(parse(["--image-source", "host", "--image-cache", "/tmp/x/../images"])).toMatchObject({ imageSource: "host", imageCache: "/tmp/images" });
    expect(parse([], { SANDBOX_SIM_IMAGE_SOURCE: "host", SANDBOX_SIM_IMAGE_CACHE: "local" })).toMatchObject({ imageSource: "host", imageCache: "local" });
    expect(() => parse(["--image-source", "registry"])).toThrow(ConfigError);
    expect(() => parse(["--image-source", "registry"])).toThrow(/--image-source/);
  });
});
