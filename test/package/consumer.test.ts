import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { trackedTempDir } from "../helpers/temp-dirs.js";

/**
 * What an adopter gets from the registry: the packed tarball installed into a fresh TypeScript project,
 * and the README's TypeScript snippets that import "sandbox-kit" type-checked against it. Runs after
 * `npm run build` (npm test builds first); the install skips scripts (types need no native module).
 */
const repo = resolve(import.meta.dirname, "../..");

function readmeSnippets(): string[] {
  const readme = readFileSync(join(repo, "README.md"), "utf8");
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((code) => code.includes('from "sandbox-kit"'));
}

function run(cmd: string, args: string[], cwd: string): string {
  return execFileSync(cmd, args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" },
  });
}

describe("the packed tarball", () => {
  it("holds the compiled programs, the public declarations and the LICENSE, no tests or benches", () => {
    const listing = JSON.parse(run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], repo)) as Array<{ files: Array<{ path: string }> }>;
    const files = listing[0]!.files.map((f) => f.path);
    expect(files).toContain("LICENSE");
    expect(files).toContain("dist/index.d.ts");
    expect(files).toContain("dist/simulator/main.js");
    expect(files).toContain("dist/sandbox-agent/main.js");
    expect(
      files.filter(
        (f) => /^(test|bench|examples)\/|^dist\/(bench|test|examples|console\/tools\/(browser|build|screenshots)\.)|\.ts$/.test(f) && !f.endsWith(".d.ts"),
      ),
    ).toEqual([]);
    expect(files).toContain("dist/console/index.html");
    // Only the public API has declarations (internal modules stay free to change). LaunchError, exported by
    // types.ts, is declared in gateway.ts (which throws it, and which types.ts already reads), so no circle.
    expect(files.filter((f) => f.endsWith(".d.ts")).sort()).toEqual([
      "dist/index.d.ts",
      "dist/simulator/config.d.ts",
      "dist/simulator/launcher/endpoint.d.ts",
      "dist/simulator/launcher/gateway.d.ts",
      "dist/simulator/launcher/types.d.ts",
    ]);
  });

  it("type-checks the README's snippets in a consumer project (TS7016 no more)", { timeout: 180_000 }, () => {
    const snippets = readmeSnippets();
    expect(snippets.length).toBeGreaterThan(0);
    const dir = trackedTempDir("sandbox-kit-consumer-");
    run("npm", ["pack", "--ignore-scripts", "--pack-destination", dir], repo);
    const tarball = readdirSync(dir).find((f) => f.endsWith(".tgz"))!;
    const project = join(dir, "consumer");
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    run("npm", ["install", "--ignore-scripts", "--prefer-offline", "--no-save", join(dir, tarball)], project);
    // The consumer's own toolchain: this repo's @types/node and TypeScript.
    mkdirSync(join(project, "node_modules/@types"), { recursive: true });
    if (!existsSync(join(project, "node_modules/@types/node"))) symlinkSync(join(repo, "node_modules/@types/node"), join(project, "node_modules/@types/node"));
    snippets.forEach((code, i) => writeFileSync(join(project, `snippet${i}.ts`), `${code}\nexport {};\n`));
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          types: ["node"],
          skipLibCheck: false,
        },
        include: ["*.ts"],
      }),
    );
    let output = "";
    try {
      run(process.execPath, [join(repo, "node_modules/typescript/bin/tsc"), "-p", project], project);
    } catch (err) {
      output = String((err as { stdout?: string }).stdout ?? err);
    }
    expect(output).toBe("");
  });
});
