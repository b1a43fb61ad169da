import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { exportOntoBase, type StoredBase } from "./base-copy.js";
import { inspectImagesViaSocket } from "./docker-api.js";
import { exportDockerImage, inspectDockerImage, type ImageConfig } from "./docker-source.js";
import { importLayout } from "./oci-import.js";
import type { Progress } from "./progress.js";
import { runTool, ToolError } from "./tools.js";

/**
 * The kept image builders a template is built with (template-build.ts):
 * `docker build` where a Docker daemon answers, else Debian's buildah. Both
 * are driven with argv only. What the simulator needs of them: whether an
 * image is local (and which store image it was made from: the label below),
 * bringing a root filesystem in as an image (the store's hub and imported
 * images, the sandbox-api stand-in), pulling, building, and getting the
 * result out as a root filesystem and its config.
 */

/** On images the simulator put into a builder: the store digest they were made from. */
export const DIGEST_LABEL = "sandbox-kit.digest";

export interface BuiltImage {
  digest: string;
  config: ImageConfig;
  /** Bytes of the root filesystem, when known without walking it. */
  size?: number;
  /** The store image it is stacked on (its digest): rootfs then holds only its own layer (base-copy.ts). */
  base?: string;
}

export interface Builder {
  readonly kind: "docker" | "buildah";
  /** The command users would run themselves (the bench's baseline, messages). */
  readonly command: string;
  /** undefined: the builder has no such image; else its DIGEST_LABEL ("" when not the simulator's). */
  localImage(name: string): Promise<{ label: string } | undefined>;
  /** Makes the directory `rootfs` an image named `name` with the config's Env and WorkingDir. */
  importRootfs(rootfs: string, name: string, config: Pick<ImageConfig, "env" | "workingDir">, digest: string): Promise<void>;
  pull(name: string): Promise<void>;
  build(tag: string, dockerfile: string, context: string, buildArgs: string[], onLine: (line: string) => void): Promise<void>;
  /** Removes a name from the builder's images (its layers go once nothing else uses them). */
  remove(name: string): Promise<void>;
  /** Unpacks the built image into rootfs (work: scratch space for the builder's output). */
  exportImage(tag: string, rootfs: string, work: string, progress: Progress): Promise<BuiltImage>;
  /**
   * Unpacks only the built image's own layers into rootfs, stacked over one of the store images it was built on
   * (base-copy.ts: BuiltImage.base); undefined, rootfs untouched, where this builder cannot (then: exportImage).
   */
  exportOntoBase?(tag: string, bases: StoredBase[], rootfs: string, progress: Progress): Promise<BuiltImage | undefined>;
}

/**
 * `tar -c` of a directory piped into a tool's stdin; rejects with the failing side's last output, and only once
 * both children have ended: a tool that fails without reading its stdin (`docker import` refusing its name) would
 * otherwise leave tar blocked on the full pipe for ever, and the caller's process with it.
 */
export function pipeDirectory(dir: string, command: string, args: string[], timeoutMs: number, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const tar = spawn("tar", ["-C", dir, "--numeric-owner", "-cf", "-", "."], { stdio: ["ignore", "pipe", "pipe"], timeout: timeoutMs });
    const tool = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], timeout: timeoutMs, env });
    let tarErr = "";
    let out = "";
    tar.stderr.on("data", (d: Buffer) => (tarErr = (tarErr + d.toString()).slice(-2000)));
    tool.stdout.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    tool.stderr.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    tar.stdout.pipe(tool.stdin);
    tool.stdin.on("error", () => {}); // the tool ended first: its exit says why
    const ended = (child: ChildProcess, end: () => void) =>
      new Promise<{ code: number | null; error?: Error }>((done) => {
        child.once("error", (error) => {
          end();
          done({ code: null, error });
        });
        child.once("close", (code) => {
          if (code !== 0) end();
          done({ code });
        });
      });
    // One side failing ends the other: tar no longer blocks on a pipe nobody reads, the tool no longer waits for input.
    const endTar = () => {
      tar.stdout.destroy();
      if (tar.exitCode === null && tar.signalCode === null) tar.kill("SIGKILL");
    };
    const endTool = () => {
      if (tool.exitCode === null && tool.signalCode === null) tool.kill("SIGTERM");
    };
    void Promise.all([ended(tar, endTool), ended(tool, endTar)]).then(([t, c]) => {
      if (c.error) reject(new ToolError(`${command}: ${(c.error as NodeJS.ErrnoException).code === "ENOENT" ? "not installed" : c.error.message}`));
      else if (c.code !== 0) reject(new ToolError(`${command} ${args[0]} failed (exit code ${c.code}): ${out.trim()}`));
      else if (t.error) reject(new ToolError(`tar: ${t.error.message}`));
      else if (t.code !== 0) reject(new ToolError(`tar of ${dir} failed: ${tarErr.trim()}`));
      else resolve(out);
    });
  });
}

const envChange = (line: string) => {
  const eq = line.indexOf("=");
  return eq > 0 ? `ENV ${line.slice(0, eq)}=${JSON.stringify(line.slice(eq + 1))}` : undefined;
};

export class DockerBuilder implements Builder {
  readonly kind = "docker";
  readonly command = "docker build";
  /** `env`: the CLI's environment, for an engine other than the local one (DOCKER_HOST of a swarm node). */
  constructor(
    private readonly docker = "docker",
    private readonly env?: NodeJS.ProcessEnv,
  ) {}

  async localImage(name: string) {
    const [viaSocket] = this.env ? [undefined] : ((await inspectImagesViaSocket([name])) ?? []);
    if (viaSocket !== undefined) {
      if (viaSocket === null) return undefined;
      return { label: (viaSocket as { Config?: { Labels?: Record<string, string> | null } }).Config?.Labels?.[DIGEST_LABEL] ?? "" };
    }
    try {
      const out = await runTool(this.docker, ["image", "inspect", "--format", `{{index .Config.Labels "${DIGEST_LABEL}"}}`, name], {
        timeoutMs: 30_000,
        env: this.env,
      });
      return { label: out.trim().replace(/^<no value>$/, "") };
    } catch {
      return undefined;
    }
  }

  async importRootfs(rootfs: string, name: string, config: Pick<ImageConfig, "env" | "workingDir">, digest: string) {
    const changes = [
      ...config.env.map(envChange).filter((c): c is string => Boolean(c)),
      `WORKDIR ${config.workingDir || "/"}`,
      `LABEL ${DIGEST_LABEL}=${digest}`,
    ];
    const before = await this.imageId(name);
    await pipeDirectory(rootfs, this.docker, ["import", ...changes.flatMap((c) => ["--change", c]), "-", name], 30 * 60_000, this.env);
    await this.dropReplaced(before, name);
  }

  private async imageId(name: string): Promise<string | undefined> {
    return runTool(this.docker, ["image", "inspect", "--format", "{{.Id}}", name], { timeoutMs: 30_000, env: this.env }).then(
      (out) => out.trim() || undefined,
      () => undefined,
    );
  }

  /** The image a name pointed at before it was given to another: removed when nothing else uses it (no dangling images left). */
  private async dropReplaced(before: string | undefined, name: string): Promise<void> {
    if (!before || before === (await this.imageId(name))) return;
    await runTool(this.docker, ["rmi", before], { timeoutMs: 120_000, env: this.env }).catch(() => undefined); // still tagged or a parent: kept
  }

  async pull(name: string) {
    await runTool(this.docker, ["pull", "--quiet", name], { timeoutMs: 10 * 60_000, env: this.env });
  }

  async build(tag: string, dockerfile: string, context: string, buildArgs: string[], onLine: (line: string) => void) {
    // The classic builder: it takes FROM and COPY --from images from the daemon's own store (where the
    // simulator put them) and needs no buildx plugin (Debian's docker.io has none).
    const before = await this.imageId(tag);
    // --force-rm: a failed step's container goes too (the classic builder keeps it otherwise).
    await runTool(this.docker, ["build", "--force-rm", "--tag", tag, "--file", dockerfile, ...buildArgs.flatMap((a) => ["--build-arg", a]), context], {
      onLine,
      timeoutMs: 60 * 60_000,
      env: { ...(this.env ?? process.env), DOCKER_BUILDKIT: "0" },
    });
    await this.dropReplaced(before, tag); // the previous build of the template
  }

  async remove(name: string) {
    await runTool(this.docker, ["rmi", name], { timeoutMs: 120_000, env: this.env }).catch(() => undefined);
  }

  async exportImage(tag: string, rootfs: string, _work: string, progress: Progress) {
    const image = await inspectDockerImage(this.docker, tag);
    if (!image) throw new ToolError(`docker build reported success but the daemon has no image ${tag}`);
    await exportDockerImage(this.docker, tag, rootfs, progress, image.size);
    return { digest: image.id, config: image.config };
  }

  exportOntoBase(tag: string, bases: StoredBase[], rootfs: string, progress: Progress) {
    return exportOntoBase(this.docker, tag, bases, DIGEST_LABEL, rootfs, progress);
  }
}

export class BuildahBuilder implements Builder {
  readonly kind = "buildah";
  readonly command = "buildah bud";
  constructor(private readonly buildah = "buildah") {}

  async localImage(name: string) {
    try {
      const out = await runTool(this.buildah, ["inspect", "--type", "image", "--format", `{{index .OCIv1.Config.Labels "${DIGEST_LABEL}"}}`, name], {
        timeoutMs: 30_000,
      });
      return { label: out.trim().replace(/^<no value>$/, "") };
    } catch {
      return undefined;
    }
  }

  async importRootfs(rootfs: string, name: string, config: Pick<ImageConfig, "env" | "workingDir">, digest: string) {
    const container = (await runTool(this.buildah, ["from", "scratch"], { timeoutMs: 60_000 })).trim();
    try {
      await runTool(this.buildah, ["copy", container, `${rootfs}/.`, "/"], { timeoutMs: 30 * 60_000 });
      await runTool(
        this.buildah,
        ["config", ...config.env.flatMap((e) => ["--env", e]), "--workingdir", config.workingDir || "/", "--label", `${DIGEST_LABEL}=${digest}`, container],
        { timeoutMs: 60_000 },
      );
      await runTool(this.buildah, ["commit", "--quiet", container, name], { timeoutMs: 30 * 60_000 });
    } finally {
      await runTool(this.buildah, ["rm", container], { timeoutMs: 60_000 }).catch(() => undefined);
    }
  }

  async pull(name: string) {
    await runTool(this.buildah, ["pull", "--quiet", name], { timeoutMs: 10 * 60_000 });
  }

  async build(tag: string, dockerfile: string, context: string, buildArgs: string[], onLine: (line: string) => void) {
    // --pull=never: every base is local by now (the simulator provided or pulled it first).
    await runTool(
      this.buildah,
      ["bud", "--pull=never", "--layers", "--tag", tag, "--file", dockerfile, ...buildArgs.flatMap((a) => ["--build-arg", a]), context],
      { onLine, timeoutMs: 60 * 60_000 },
    );
  }

  async remove(name: string) {
    await runTool(this.buildah, ["rmi", name], { timeoutMs: 120_000 }).catch(() => undefined);
  }

  async exportImage(tag: string, rootfs: string, work: string, progress: Progress) {
    progress.phase(`exporting ${tag} from buildah`);
    const layout = join(work, "oci-layout");
    // Uncompressed (-D): the layers are unpacked at once; gzip would only cost time.
    await runTool(this.buildah, ["push", "--quiet", "--disable-compression", tag, `oci:${layout}:latest`], { timeoutMs: 30 * 60_000 });
    const imported = await importLayout(layout, rootfs, progress);
    return { digest: imported.digest, config: imported.config };
  }
}

/** Where a builder answers: the daemon (`docker info`), else buildah (`buildah info`); undefined with the reasons otherwise. */
export async function findBuilder(docker: string | null = "docker"): Promise<{ builder?: Builder; unavailable: string[] }> {
  const unavailable: string[] = [];
  if (docker) {
    try {
      await runTool(docker, ["info", "--format", "{{.ServerVersion}}"], { timeoutMs: 15_000 });
      return { builder: new DockerBuilder(docker), unavailable };
    } catch (err) {
      unavailable.push(`docker: ${(err as Error).message.split("\n").slice(-1)[0]}`);
    }
  }
  try {
    await runTool("buildah", ["info"], { timeoutMs: 30_000 });
    return { builder: new BuildahBuilder(), unavailable };
  } catch (err) {
    unavailable.push(`buildah: ${(err as Error).message.split("\n").slice(-1)[0]}`);
  }
  return { unavailable };
}
