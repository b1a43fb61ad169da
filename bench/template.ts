import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findBuilder } from "../simulator/images/builders.js";
import { defaultImageCacheDir, ImageStore } from "../simulator/images/image-store.js";
import { builderTag, buildTemplate } from "../simulator/images/template-build.js";
import { fmt, peakRssMiB } from "./lib.js";

/**
 * bench:e2e --template — the build time of a one-RUN template on a cached base
 * (blaxel/base-image in the per-user store, given to the builder once before
 * timing), through `sandbox-sim images build` (buildTemplate: the builder, then
 * the export into the store) beside the same Dockerfile built by the builder
 * run directly (docker build, else buildah bud), alternately, best of each.
 * Each build's RUN line differs, so no build reuses another's layer.
 *
 *   BENCH_E2E_TEMPLATE_ROUNDS  rounds (default 2)
 */
const rounds = Number(process.env.BENCH_E2E_TEMPLATE_ROUNDS ?? 2);
const BASE = "blaxel/base-image";

export async function benchTemplate(): Promise<void> {
  const { builder, unavailable } = await findBuilder();
  if (!builder) return console.log(`template build  skipped: no builder (${unavailable.join("; ")})`);
  const store = new ImageStore({ dir: defaultImageCacheDir() });
  if ((await store.locate(BASE)).kind !== "stored")
    return console.log(`template build  skipped: ${BASE} is not built in ${store.dir} (sandbox-sim images build ${BASE})`);
  const dir = mkdtempSync(join(tmpdir(), "bench-template-"));
  const dockerfile = (nonce: string) => {
    writeFileSync(join(dir, "Dockerfile"), `FROM ${BASE}\nRUN echo ${nonce} > /opt/bench-marker\n`);
    return join(dir, "Dockerfile");
  };
  const names: string[] = [];
  try {
    // Once untimed: the base is given to the builder (cached from then on, as for any later build).
    names.push(`sandbox-kit-bench/template:warmup`);
    await buildTemplate(store, names[0]!, dir, { dockerfile: dockerfile(`warmup-${Date.now()}`), builder });
    let direct = Infinity;
    let simulated = Infinity;
    for (let i = 0; i < rounds; i++) {
      const nonce = `${Date.now()}-${i}`;
      let start = performance.now();
      await builder.build(`sandbox-kit-bench/direct:${i}`, dockerfile(`direct-${nonce}`), dir, [], () => {});
      direct = Math.min(direct, performance.now() - start);
      const name = `sandbox-kit-bench/template:r${i}`;
      names.push(name);
      start = performance.now();
      await buildTemplate(store, name, dir, { dockerfile: dockerfile(`sim-${nonce}`), builder });
      simulated = Math.min(simulated, performance.now() - start);
    }
    const size = store.get(names[names.length - 1]!)?.manifest.size ?? 0;
    console.log(
      `template build  one RUN on cached ${BASE} (${fmt(size / 2 ** 20)} MiB): sandbox-sim images build ${fmt(simulated)} ms | ${builder.command} directly ${fmt(direct)} ms | ratio ${fmt(direct / simulated, 2)} (target >= 0.9) | best of ${rounds} | bench peak RSS ${fmt(peakRssMiB(process.pid))} MiB`,
    );
  } finally {
    for (const name of names) {
      store.remove(name);
      await builder.remove(builderTag(name));
    }
    for (let i = 0; i < rounds; i++) await builder.remove(`sandbox-kit-bench/direct:${i}`);
    rmSync(dir, { recursive: true, force: true });
  }
}
