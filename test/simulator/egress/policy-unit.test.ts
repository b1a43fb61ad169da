import { describe, expect, it } from "vitest";
import { simulatorHostNames } from "../../../simulator/egress/index.js";
import { hostsFile } from "../../../simulator/launcher/sandbox-setup.js";
import {
  decide,
  injectionFor,
  LIMITS,
  matches,
  NetworkSpecError,
  parseNetwork,
  resolveSecrets,
  restricts,
  usesProxy,
} from "../../../simulator/egress/policy.js";

describe("spec.network as the egress proxy reads it", () => {
  it("matches exact names, *.subdomains (not the apex) and *", () => {
    expect(matches("example.com", "EXAMPLE.com.")).toBe(true);
    expect(matches("example.com", "a.example.com")).toBe(false);
    expect(matches("*.example.com", "a.b.example.com")).toBe(true);
    expect(matches("*.example.com", "example.com")).toBe(false);
    expect(matches("*.example.com", "badexample.com")).toBe(false);
    expect(matches("*", "anything.test")).toBe(true);
  });

  it("merges top-level and proxy lists; allowedDomains wins over forbiddenDomains", () => {
    const both = parseNetwork({ allowedDomains: ["a.test"], proxy: { forbiddenDomains: ["a.test"], allowedDomains: ["*.b.test"] } })!;
    expect(decide(both, "a.test")).toEqual({ allowed: true });
    expect(decide(both, "x.b.test")).toEqual({ allowed: true });
    expect(decide(both, "c.test")).toMatchObject({ allowed: false, rule: "allowedDomains" });
    const deny = parseNetwork({ forbiddenDomains: ["*.evil.test"] })!;
    expect(decide(deny, "x.evil.test")).toMatchObject({ allowed: false, rule: "forbiddenDomains", reason: expect.stringContaining("*.evil.test") });
    expect(decide(deny, "good.test")).toEqual({ allowed: true });
    expect(restricts(deny)).toBe(true);
    expect(restricts(parseNetwork({ proxy: { routing: [] } }))).toBe(false);
    expect(decide(undefined, "any.test")).toEqual({ allowed: true });
  });

  it("resolves {{SECRET:name}} from the rule's own secrets, for its destinations only; later rules win", () => {
    const policy = parseNetwork({
      proxy: {
        routing: [
          { destinations: ["*"], headers: { "X-Global": "Bearer {{SECRET:g}}" }, secrets: { g: "gv" } },
          { destinations: ["api.test"], headers: { "x-global": "{{ SECRET:k }}" }, body: { key: "{{SECRET:k}}" }, secrets: { k: "kv" } },
        ],
      },
    });
    expect(injectionFor(policy, "api.test")).toEqual({ headers: { "x-global": "kv" }, body: { key: "kv" }, secrets: { g: "gv", k: "kv" } });
    expect(injectionFor(policy, "other.test")).toEqual({ headers: { "x-global": "Bearer gv" }, body: {}, secrets: { g: "gv" } });
    expect(injectionFor(parseNetwork({}), "other.test")).toBeUndefined();
  });

  it("resolves the program's own {{SECRET:name}} from the destination's secrets only, leaving other names as written", () => {
    const secrets = { "api-token": "tok", a: "A" };
    expect(resolveSecrets("Bearer {{SECRET:api-token}} {{ SECRET:a }}-{{SECRET:other}}", secrets)).toBe("Bearer tok A-{{SECRET:other}}");
    expect(resolveSecrets("{{SECRET:constructor}}", secrets)).toBe("{{SECRET:constructor}}");
    expect(resolveSecrets("plain", secrets)).toBe("plain");
  });

  it("gives the proxy's variables to a policy with routing rules or a restriction, not to routing: [] alone", () => {
    expect(usesProxy(parseNetwork({ proxy: { routing: [{ destinations: ["a.test"] }] } }))).toBe(true);
    expect(usesProxy(parseNetwork({ allowedDomains: ["a.test"] }))).toBe(true);
    expect(usesProxy(parseNetwork({ proxy: { routing: [] } }))).toBe(false);
    expect(usesProxy(parseNetwork({ proxy: { bypass: ["a.test"] } }))).toBe(false);
    expect(usesProxy(undefined)).toBe(false);
    expect(parseNetwork({ firewall: { rulesets: ["proxy"] } })?.proxyOnly).toBe(true);
    expect(parseNetwork({ firewall: { rulesets: ["other"] } })?.proxyOnly).toBeUndefined();
  });

  it("rejects what cannot be applied, naming the field", () => {
    const problem = (network: unknown) => {
      try {
        parseNetwork(network);
        return "";
      } catch (err) {
        expect(err).toBeInstanceOf(NetworkSpecError);
        return (err as Error).message;
      }
    };
    expect(problem({ allowedDomains: ["ex ample.com"] })).toMatch(/^spec\.network\.allowedDomains\[0\]/);
    expect(problem({ forbiddenDomains: ["a.*.com"] })).toMatch(/^spec\.network\.forbiddenDomains\[0\]/);
    expect(problem({ proxy: { allowedDomains: "example.com" } })).toMatch(/^spec\.network\.proxy\.allowedDomains: must be a list/);
    expect(problem({ proxy: { routing: [{ destinations: ["*"], body: { f: "{{SECRET:nope}}" }, secrets: {} }] } })).toMatch(
      /^spec\.network\.proxy\.routing\[0\]\.body\.f: \{\{SECRET:nope\}\}/,
    );
    expect(problem({ proxy: { routing: [{ headers: { a: "b" } }] } })).toMatch(/routing\[0\]\.destinations/);
    expect(problem({ proxy: { routing: [{ destinations: ["*"], headers: { "bad header": "b" } }] } })).toMatch(/routing\[0\]\.headers/);
    expect(problem({ forbiddenDomains: Array.from({ length: LIMITS.domains + 1 }, (_, i) => `d${i}.test`) })).toMatch(
      /^spec\.network\.forbiddenDomains: at most/,
    );
    expect(problem({ proxy: { routing: Array.from({ length: LIMITS.rules + 1 }, () => ({ destinations: ["*"] })) } })).toMatch(
      /^spec\.network\.proxy\.routing: at most/,
    );
    expect(problem({ allowedDomains: ["10.0.0.1", "*.example.com", "*"], proxy: { bypass: ["internal.test"] } })).toBe("");
  });
});

describe("the simulator's /_sim routes from inside", () => {
  it("are recognised however they are spelled", async () => {
    const { isSimRoute } = await import("../../../simulator/egress/egress-proxy.js");
    for (const path of ["/_sim/clock", "/_SIM/clock", "/%5Fsim/clock", "//_sim/x", "/_sim", "/_sim?x=1", "/%E0%A4%A"])
      expect(isSimRoute(path), path).toBe(true);
    for (const path of ["/v0/sandboxes", "/_simulator", "/x/_sim/clock"]) expect(isSimRoute(path), path).toBe(false);
  });
});

describe("the simulator's --public-url host inside a sandbox", () => {
  it("is a name of 127.0.0.1 (its gateway) in the sandbox's /etc/hosts, unless it is an address or localhost", () => {
    expect(simulatorHostNames(new URL("http://sim.example.test:8081"))).toEqual(["sim.example.test"]);
    for (const base of ["http://127.0.0.1:8081", "http://[::1]:8081", "http://localhost:8081", "http://x.localhost"])
      expect(simulatorHostNames(new URL(base))).toEqual([]);
    const hosts = hostsFile("box", ["sim.example.test"]);
    expect(hosts.split("\n")[0]).toBe("127.0.0.1\tlocalhost sim.example.test");
    expect(hostsFile("box")).toContain("127.0.1.1\tbox");
  });
});
