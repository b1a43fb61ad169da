import { useMemo, useState } from "preact/hooks";
import { StackedChart, PALETTE, type StackedSeries } from "../chart.js";
import { ErrorBox, html, Section, useApp, usePoll } from "../ui.js";

/**
 * Account metrics (GET /v0/accounts/{id}/metrics): cost over a window, grouped
 * by one dimension, every page followed (meta.nextCursor), as a stacked chart
 * and a table whose rows add up to summary.totalCost (the API's rounding rule
 * makes the sum exact to the nano-dollar).
 */
interface Account {
  id: string;
  name: string;
  role: string;
}

interface Entry {
  workspace?: string;
  resourceType?: string;
  billingDimension?: string;
  summary: { cost: number; usage?: number };
  timeseries: { timestamp: string; cost: number }[];
}

interface MetricsPage {
  startTime: string;
  endTime: string;
  resolution: string;
  summary: { totalCost: number; totalUsage?: number };
  data: Entry[];
  meta: { hasMore: boolean; nextCursor: string; total: number };
}

const GROUPS = [
  ["billing_dimension", "Billing dimension", (e: Entry) => e.billingDimension],
  ["resource_type", "Resource type", (e: Entry) => e.resourceType],
  ["workspace", "Workspace", (e: Entry) => e.workspace],
] as const;

const WINDOWS: [string, number][] = [
  ["24h", 1],
  ["7 days", 7],
  ["30 days", 30],
  ["90 days", 90],
  ["365 days", 365],
];

/** USD exactly as the API gave it (nano-dollar precision), at least cents. */
export function usd(v: number): string {
  const fixed = Math.abs(v).toFixed(9).replace(/0+$/, "");
  const [whole, frac = ""] = fixed.split(".");
  return `${v < 0 ? "-" : ""}$${Number(whole).toLocaleString("en-US")}.${frac.padEnd(2, "0")}`;
}

const usage = (v?: number) => (v === undefined ? "—" : v.toLocaleString("en-US", { maximumFractionDigits: 6 }));
const dayStart = (ms: number) => new Date(Math.floor(ms / 86_400_000) * 86_400_000).toISOString();

export function MetricsPage() {
  const { api } = useApp();
  const accounts = usePoll(() => api.get<Account[]>("/v0/accounts"), [], 0);
  const [account, setAccount] = useState<string | undefined>();
  const [group, setGroup] = useState<string>("billing_dimension");
  const [preset, setPreset] = useState("30");
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [resolution, setResolution] = useState("");
  const accountId = account ?? accounts.data?.[0]?.id;
  const window = useMemo(() => {
    if (preset === "custom" && from && to) return { start: new Date(`${from}T00:00:00Z`).toISOString(), end: new Date(`${to}T00:00:00Z`).toISOString() };
    const days = Number(preset === "custom" ? "30" : preset);
    // Whole days (hours for 24h), so the window is stable between refreshes.
    const end = days === 1 ? new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000).toISOString() : dayStart(Date.now() + 86_400_000);
    return { start: new Date(Date.parse(end) - days * 86_400_000).toISOString(), end };
  }, [preset, from, to]);
  const metrics = usePoll(
    async () => {
      if (!accountId) return undefined;
      let page: MetricsPage | undefined;
      const data: Entry[] = [];
      let cursor = "";
      do {
        page = await api.get<MetricsPage>(`/v0/accounts/${encodeURIComponent(accountId)}/metrics`, {
          query: { startTime: window.start, endTime: window.end, groupBy: group, resolution: resolution || undefined, limit: 100, cursor },
        });
        data.push(...page.data);
        cursor = page.meta.nextCursor;
      } while (page.meta.hasMore && cursor);
      return { ...page, data };
    },
    [accountId, group, window.start, window.end, resolution],
    10_000,
  );

  const labelOf = GROUPS.find(([id]) => id === group)![2];
  const result = metrics.data;
  const chart = useMemo(() => {
    if (!result?.data.length) return undefined;
    const times = result.data[0]!.timeseries.map((p) => Date.parse(p.timestamp));
    const series: StackedSeries[] = result.data.map((e) => ({ label: labelOf(e) ?? "—", values: e.timeseries.map((p) => p.cost) }));
    return { times, series };
  }, [result]);

  return html`<div class="page">
    <h1>Account metrics</h1>
    <${ErrorBox} error=${accounts.error} />
    <form class="inline-form pickers" onSubmit=${(e: Event) => e.preventDefault()}>
      ${
        accounts.data && accounts.data.length > 1
          ? html`<label
              >Account
              <select value=${accountId} onChange=${(e: Event) => setAccount((e.currentTarget as HTMLSelectElement).value)}>
                ${accounts.data.map((a) => html`<option value=${a.id}>${a.name} (${a.id})</option>`)}
              </select></label
            >`
          : null
      }
      <label
        >Group by
        <select name="groupBy" value=${group} onChange=${(e: Event) => setGroup((e.currentTarget as HTMLSelectElement).value)}>
          ${GROUPS.map(([id, label]) => html`<option value=${id}>${label}</option>`)}
        </select></label
      >
      <label
        >Window
        <select name="window" value=${preset} onChange=${(e: Event) => setPreset((e.currentTarget as HTMLSelectElement).value)}>
          ${WINDOWS.map(([label, days]) => html`<option value=${String(days)}>Last ${label}</option>`)}
          <option value="custom">Custom (UTC days)</option>
        </select></label
      >
      ${
        preset === "custom"
          ? html` <label
                >From <input name="from" type="date" value=${from} onChange=${(e: Event) => setFrom((e.currentTarget as HTMLInputElement).value)}
              /></label>
              <label
                >To (exclusive) <input name="to" type="date" value=${to} onChange=${(e: Event) => setTo((e.currentTarget as HTMLInputElement).value)}
              /></label>`
          : null
      }
      <label
        >Resolution
        <select name="resolution" value=${resolution} onChange=${(e: Event) => setResolution((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">auto</option>
          <option value="hourly">hourly</option>
          <option value="daily">daily</option>
          <option value="weekly">weekly</option>
          <option value="monthly">monthly</option>
        </select></label
      >
    </form>
    <${ErrorBox} error=${metrics.error} />
    ${result ? html`<p class="muted small">${result.startTime} → ${result.endTime} · ${result.resolution} · account ${accountId}</p>` : null}
    <${Section} title="Cost over time (USD)">
      ${chart ? html`<${StackedChart} times=${chart.times} series=${chart.series} format=${usd} title=${`Cost by ${GROUPS.find(([id]) => id === group)![1].toLowerCase()}`} />` : html`<p class="muted">${metrics.loading ? "Loading…" : "No usage in this window."}</p>`}
    <//>
    ${
      result
        ? html`<${Section} title="Breakdown">
            <div class="table-wrap">
              <table aria-label="Cost breakdown" class="numbers">
                <thead>
                  <tr>
                    <th scope="col">${GROUPS.find(([id]) => id === group)![1]}</th>
                    ${group === "billing_dimension" ? html`<th scope="col">Usage</th>` : null}
                    <th scope="col">Cost</th>
                    <th scope="col">Share</th>
                  </tr>
                </thead>
                <tbody>
                  ${result.data.map(
                    (e, i) =>
                      html`<tr data-group=${labelOf(e)}>
                        <th scope="row"><span class=${`swatch c${i % PALETTE.length}`} aria-hidden="true"></span>${labelOf(e) ?? "—"}</th>
                        ${group === "billing_dimension" ? html`<td class="num">${usage(e.summary.usage)}</td>` : null}
                        <td class="num" data-cost>${usd(e.summary.cost)}</td>
                        <td class="num">${result.summary.totalCost ? `${((e.summary.cost / result.summary.totalCost) * 100).toFixed(1)}%` : "—"}</td>
                      </tr>`,
                  )}
                </tbody>
                <tfoot>
                  <tr>
                    <th scope="row">Total</th>
                    ${group === "billing_dimension" ? html`<td class="num">${usage(result.summary.totalUsage)}</td>` : null}
                    <td class="num" data-total>${usd(result.summary.totalCost)}</td>
                    <td class="num">100%</td>
                  </tr>
                </tfoot>
              </table>
            </div>
          <//>`
        : null
    }
  </div>`;
}
