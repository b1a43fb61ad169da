import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { defaultImageCacheDir, ImageNotFoundError, ImageStore } from "./image-store.js";
import { ImageRefError } from "./image-ref.js";
import { streamProgress } from "./progress.js";
import { RECIPES } from "./recipes.js";
import { buildTemplate, TemplateBuildError } from "./template-build.js";
import { BuildahBuilder, DockerBuilder } from "./builders.js";

/**
 * `sandbox-sim images <command>` (also `npm run images -- <command>`): the
 * image store from the command line. Builds and imports show a progress bar
 * on a terminal, plain lines otherwise.
 */

export const IMAGES_USAGE = `Usage: sandbox-sim images <command> [options]

  list                          the images in the store (name, source, size, digest)
  hub                           the hub images this simulator can build
  build <name>...               build a hub image (blaxel/base-image, blaxel/nextjs, ...) or export a
                                local Docker daemon's image into the store; --force rebuilds
  build <name[:tag]> --file <Dockerfile> <context dir>
                                build a template from a Dockerfile (docker build, else buildah) into the
                                store; FROM may name hub and stored images, COPY --from=ghcr.io/blaxel-ai/sandbox
                                gets sandbox-kit's sandbox-api stand-in; --build-arg K=V (repeatable);
                                --builder docker|buildah (default: docker where a daemon answers, else buildah)
  import <dir-or-tar> --name <name>
                                import an OCI image layout or a docker save archive (dir, .tar, .tar.gz)
  inspect <name>                the image's manifest (JSON)
  rm <name>...                  remove names from the store (the image goes with its last name)
  prune                         remove the images no name points at (older builds of changed recipes)

  --image-cache <dir>           the store (default ~/.cache/sandbox-kit/images; env SANDBOX_SIM_IMAGE_CACHE)
`;

function human(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

/** Runs the command; returns the process exit code. */
export async function imagesCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream & { isTTY?: boolean },
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        "image-cache": { type: "string" },
        name: { type: "string" },
        file: { type: "string", short: "f" },
        "build-arg": { type: "string", multiple: true },
        builder: { type: "string" },
        force: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (e) {
    err.write(`sandbox-sim images: ${(e as Error).message}\n\n${IMAGES_USAGE}`);
    return 2;
  }
  const [command, ...names] = parsed.positionals;
  if (parsed.values.help || !command) {
    (command ? out : err).write(IMAGES_USAGE);
    return parsed.values.help ? 0 : 2;
  }
  const store = new ImageStore({ dir: parsed.values["image-cache"] ? resolve(parsed.values["image-cache"]) : defaultImageCacheDir(env) });
  try {
    switch (command) {
      case "list": {
        const images = store.list();
        if (parsed.values.json)
          out.write(
            JSON.stringify(
              images.map((i) => ({ name: i.ref, ...i.manifest, rootfs: i.rootfs, layers: i.layers })),
              null,
              2,
            ) + "\n",
          );
        else if (images.length === 0) out.write(`no images in ${store.dir}\n`);
        else
          for (const i of images)
            out.write(
              `${i.ref.padEnd(40)} ${i.manifest.source.padEnd(7)} ${human(i.manifest.size).padStart(10)}  ${i.manifest.digest.slice(0, 19)}  ${i.manifest.created}\n`,
            );
        return 0;
      }
      case "hub":
        for (const r of RECIPES) out.write(`blaxel/${r.name.padEnd(16)} ${r.description}\n`);
        return 0;
      case "build": {
        if (parsed.values.file !== undefined) {
          if (names.length !== 2)
            throw new UsageError("build --file needs a name and a context directory: build <name[:tag]> --file <Dockerfile> <context dir>");
          const chosen = parsed.values.builder;
          if (chosen !== undefined && chosen !== "docker" && chosen !== "buildah") throw new UsageError(`--builder must be docker or buildah, not "${chosen}"`);
          const builder = chosen === "docker" ? new DockerBuilder() : chosen === "buildah" ? new BuildahBuilder() : undefined;
          const image = await buildTemplate(store, names[0]!, names[1]!, {
            dockerfile: resolve(parsed.values.file),
            buildArgs: parsed.values["build-arg"],
            builder,
            progress: streamProgress(err, names[0]!),
          });
          out.write(`${image.ref} ${image.manifest.source} ${human(image.manifest.size)} ${image.rootfs}\n`);
          return 0;
        }
        if (names.length === 0) throw new UsageError("build needs at least one image name");
        for (const name of names) {
          const progress = streamProgress(err, name);
          const image = parsed.values.force ? await store.rebuild(name, progress) : await store.ensure(name, progress);
          out.write(`${image.ref} ${image.manifest.source} ${human(image.manifest.size)} ${image.rootfs}\n`);
        }
        return 0;
      }
      case "import": {
        if (names.length !== 1 || !parsed.values.name) throw new UsageError("import needs one file or directory and --name <name>");
        const image = await store.import(resolve(names[0]!), parsed.values.name, streamProgress(err, parsed.values.name));
        out.write(`${image.ref} ${human(image.manifest.size)} ${image.manifest.digest}\n`);
        return 0;
      }
      case "inspect": {
        if (names.length !== 1) throw new UsageError("inspect needs one image name");
        const image = store.get(names[0]!);
        if (!image) throw new ImageNotFoundError(names[0]!, [], `image "${names[0]}" is not in the store (${store.dir})`);
        out.write(JSON.stringify({ name: image.ref, rootfs: image.rootfs, layers: image.layers, ...image.manifest }, null, 2) + "\n");
        return 0;
      }
      case "rm": {
        if (names.length === 0) throw new UsageError("rm needs at least one image name");
        let missing = 0;
        for (const name of names) {
          if (store.remove(name)) out.write(`removed ${name}\n`);
          else {
            err.write(`sandbox-sim images: ${name} is not in the store\n`);
            missing++;
          }
        }
        return missing ? 1 : 0;
      }
      case "prune":
        for (const digest of store.prune()) out.write(`removed ${digest}\n`);
        return 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      err.write(`sandbox-sim images: ${e.message}\n\n${IMAGES_USAGE}`);
      return 2;
    }
    if (e instanceof ImageNotFoundError || e instanceof ImageRefError || e instanceof TemplateBuildError) {
      err.write(`sandbox-sim images: ${e.message}\n`);
      return 1;
    }
    err.write(`sandbox-sim images: ${(e as Error).message}\n`);
    return 1;
  }
}

class UsageError extends Error {}
