const MiB = 1024 * 1024;

/** Samples this process's RSS while `work` runs; returns the peak growth in MiB (what a streamed body must not cost). */
export async function rssGrowthDuring(work: () => Promise<void>): Promise<number> {
  global.gc?.();
  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  try {
    await work();
  } finally {
    clearInterval(sampler);
  }
  peak = Math.max(peak, process.memoryUsage().rss);
  return (peak - before) / MiB;
}

/** Writes `mib` MiB of `fill` bytes, 1 MiB at a time, waiting for drain (a streamed body), then ends. */
export function writeMiB(out: NodeJS.WritableStream, mib: number, fill = 7): void {
  const chunk = Buffer.alloc(MiB, fill);
  let sent = 0;
  const more = () => {
    while (sent < mib) {
      sent++;
      if (!out.write(chunk)) return void out.once("drain", more);
    }
    out.end();
  };
  more();
}
