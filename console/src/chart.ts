import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import { html } from "./ui.js";

/**
 * A stacked area chart on uPlot: each series is drawn at its cumulative height
 * and filled down to the one below (uPlot bands); the legend shows each
 * series' own value, not the cumulative one.
 */
export const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#2f4b7c", "#a05195"];

export interface StackedSeries {
  label: string;
  values: number[];
}

export function StackedChart({ times, series, format, title }: { times: number[]; series: StackedSeries[]; format: (v: number) => string; title: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const cumulative: number[][] = [];
    const acc = times.map(() => 0);
    for (const s of series) {
      s.values.forEach((v, i) => (acc[i] = (acc[i] ?? 0) + v));
      cumulative.push([...acc]);
    }
    const opts: uPlot.Options = {
      title,
      width: Math.max(300, el.clientWidth),
      height: 320,
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: PALETTE[i % PALETTE.length],
          fill: `${PALETTE[i % PALETTE.length]}99`,
          width: 1,
          points: { show: false },
          value: (_u: uPlot, _v: number | null, _si: number, idx: number | null) => (idx === null ? "—" : format(s.values[idx] ?? 0)),
        })),
      ],
      bands: series.slice(1).map((_, i) => ({ series: [i + 2, i + 1] as [number, number] })),
      axes: [{}, { values: (_u, ticks) => ticks.map((t) => format(t)), size: 80 }],
      scales: { x: { time: true } },
      cursor: { drag: { x: false, y: false } },
    };
    const plot = new uPlot(opts, [times.map((t) => t / 1000), ...cumulative] as uPlot.AlignedData, el);
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(300, el.clientWidth), height: 320 }));
    observer.observe(el);
    return () => {
      observer.disconnect();
      plot.destroy();
    };
  }, [times, series, title]);
  return html`<div class="chart" ref=${box} role="img" aria-label=${`${title}: stacked chart, figures in the table below`}></div>`;
}
