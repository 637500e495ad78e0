// A run's overview: its metadata (command, git, host, CPU, GPU, versions, tags), the
// tracer's overhead and drops, the percentile summary (`opsight report --summary`'s JSON),
// for the span name selected in it a latency histogram and CDF, and a chart over time of
// every metric the run sampled (RSS, CPU, I/O, GPU counter tracks), titled in words with
// its unit (metric_names.ts), with the minimum, mean, maximum and last value of `opsight
// report --metrics`.

import { apiFetch, runPath, type RunDetail, type SummaryRow, type TimelineLayout } from "../api";
import { drawCdf, drawHistogram, drawMetricChart, type HistogramBucket } from "../charts";
import { h } from "../dom";
import { formatBytes, formatCount, formatDuration, formatShare, formatUnixTime } from "../format";
import { metricTitle } from "../metric_names";
import { routeHref } from "../router";
import { sortableTable } from "../table";

interface LatencyAnswer {
  name: string;
  histogram: HistogramBucket[];
  cdf: { percent: number; duration_ns: number }[];
  distribution: { count: number; p50_ns: number; p99_ns: number };
}

export function runTabs(run: string, current: string): HTMLElement {
  const tab = (page: "overview" | "timeline" | "traces" | "tree" | "details", title: string) =>
    h("a", { href: routeHref({ page, run }), class: page === current ? "tab current" : "tab", id: `tab-${page}` }, title);
  return h("nav", { class: "tabs" }, tab("overview", "Overview"), tab("timeline", "Timeline"), tab("traces", "Traces"), tab("tree", "Call tree / flame graph"), tab("details", "Latency details"));
}

export async function overviewPage(root: HTMLElement, run: string, query: Record<string, string>): Promise<void> {
  const [detail, summary] = await Promise.all([
    apiFetch<RunDetail>(runPath(run)),
    apiFetch<SummaryRow[]>(runPath(run, "/report/summary")),
  ]);
  const facts: [string, string][] = [
    ["label", detail.label],
    ["command", detail.command || String(detail.recording.command_line ?? "")],
    ["created (UTC)", formatUnixTime(detail.created_unix_ns ?? 0)],
    ["git commit", detail.git_commit ?? ""],
    ["host", detail.host || String(detail.recording.host ?? "")],
    ["CPU", detail.cpu ?? ""],
    ["GPU", detail.gpu ?? ""],
    ["working directory", detail.working_directory ?? ""],
    ["versions", Object.entries(detail.versions ?? {}).map(([k, v]) => `${k} ${v}`).join(", ")],
    ["tags", Object.entries(detail.tags ?? {}).map(([k, v]) => `${k}=${v}`).join(", ")],
    ["source format", String(detail.recording.source_format ?? "")],
    ["slices", formatCount(detail.counts.slices)],
    ["duration", formatDuration(detail.end_ns - detail.start_ns)],
  ];
  const metadata = h("dl", { class: "facts" });
  for (const [key, value] of facts) if (value) metadata.append(h("dt", {}, key), h("dd", {}, value));
  const overhead = h(
    "p",
    { class: "overhead", id: "overhead", data: { overheadNs: detail.overhead.overhead_ns, dropped: detail.overhead.events_dropped } },
    detail.overhead.line,
  );
  const damage = detail.damage.map((line) => h("p", { class: "warning" }, `damaged input: ${line}`));
  const charts = h("section", { id: "latency" });
  const metricsHolder = h("section", { id: "metrics" });
  const select = async (name: string) => {
    history.replaceState(null, "", routeHref({ page: "overview", run, query: { name } }));
    const latency = await apiFetch<LatencyAnswer>(runPath(run, "/latency"), { name, buckets: 40 });
    const histogram = h("canvas", { id: "histogram" });
    const cdf = h("canvas", { id: "cdf" });
    charts.replaceChildren(
      h("h2", {}, "Latency of ", h("code", { id: "latency-name" }, latency.name)),
      h(
        "p",
        {},
        `${formatCount(latency.distribution.count)} calls, median ${formatDuration(latency.distribution.p50_ns)}, p99 ${formatDuration(latency.distribution.p99_ns)}`,
      ),
      h("div", { class: "charts" }, h("figure", {}, histogram, h("figcaption", {}, "histogram")), h("figure", {}, cdf, h("figcaption", {}, "CDF"))),
    );
    drawHistogram(histogram, latency.histogram);
    drawCdf(cdf, latency.cdf);
  };
  const duration = (key: keyof SummaryRow) => ({
    title: key.replace("_ns", "").replace("p999", "p99.9"),
    value: (row: SummaryRow) => row[key] as number,
    render: (row: SummaryRow) => formatDuration(row[key] as number),
    numeric: true,
  });
  const table = sortableTable<SummaryRow>(
    [
      { title: "name", value: (row) => row.name, className: "name" },
      { title: "count", value: (row) => row.count, render: (row) => formatCount(row.count), numeric: true },
      duration("total_ns"),
      duration("self_ns"),
      duration("min_ns"),
      duration("mean_ns"),
      duration("p50_ns"),
      duration("p90_ns"),
      duration("p95_ns"),
      duration("p99_ns"),
      duration("p999_ns"),
      duration("max_ns"),
      duration("stddev_ns"),
    ],
    summary,
    { onRowClick: (row) => void select(row.name), className: "data summary" },
  );
  table.id = "summary-table";
  root.replaceChildren(
    h("h1", {}, detail.label),
    runTabs(run, "overview"),
    ...damage,
    metadata,
    overhead,
    h("p", {}, `tracer overhead share: ${formatShare(detail.overhead.share)}`),
    h("h2", {}, "Percentile summary ", h("small", {}, "(click a row for its histogram and CDF)")),
    table,
    charts,
    metricsHolder,
  );
  void showMetrics(metricsHolder, run);
  const first = query.name ?? summary[0]?.name;
  if (first !== undefined) await select(first);
}

interface MetricsReport {
  counters: { name: string; pid: number; unit: string; samples: number; min: number; mean: number; max: number; last: number }[];
}

export function formatMetric(value: number, unit: string): string {
  if (unit === "bytes") return formatBytes(value);
  if (unit === "bytes/s") return `${formatBytes(value)}/s`;
  if (unit === "percent" || unit === "%") return `${value.toFixed(1)}%`;
  const text = Math.abs(value) >= 1e6 || Number.isInteger(value) ? String(Math.round(value * 1000) / 1000) : value.toPrecision(4);
  return unit ? `${text} ${unit}` : text;
}

// A chart per counter track over the whole run (/counters at ~1 point per pixel), titled
// with the report's statistics of that metric.
async function showMetrics(holder: HTMLElement, run: string): Promise<void> {
  const [layout, report] = await Promise.all([
    apiFetch<TimelineLayout>(runPath(run, "/timeline")),
    apiFetch<MetricsReport>(runPath(run, "/report/metrics")),
  ]);
  const counters = layout.processes.flatMap((process) => process.counters.map((counter) => ({ counter, pid: process.pid })));
  if (!counters.length) {
    holder.replaceChildren(h("h2", {}, "Metrics over time"), h("p", { class: "hint" }, "This run sampled no metrics (opsight run samples RSS, CPU, I/O and GPU)."));
    return;
  }
  // As many charts side by side as fit at 380 px or more, sharing the page's width.
  const available = Math.floor(holder.getBoundingClientRect().width) || 900;
  const gap = 16;
  const columns = Math.max(1, Math.floor((available + gap) / (380 + gap)));
  const width = Math.max(300, Math.floor((available - gap * (columns - 1)) / columns));
  const resolution = Math.max(1, Math.ceil((layout.end_ns - layout.start_ns) / width));
  const figures = await Promise.all(
    counters.map(async ({ counter, pid }) => {
      const answer = await apiFetch<{ points: [number, number, number, number, number][] }>(runPath(run, "/counters"), {
        track: counter.id,
        start: layout.start_ns,
        end: layout.end_ns,
        resolution,
      });
      const statistics = report.counters.find((row) => row.name === counter.name && row.pid === pid);
      const unit = statistics?.unit || counter.unit;
      const canvas = h("canvas", { class: "metric-chart" });
      const caption = h(
        "figcaption",
        {},
        h("b", { class: "metric-name", title: counter.name }, metricTitle(counter.name, counter.unit)),
        ` pid ${pid} `,
        h("code", { class: "metric-key" }, counter.name),
        h("br"),
      );
      if (statistics)
        for (const key of ["min", "mean", "max", "last"] as const)
          caption.append(" ", h("span", { class: `metric-${key}`, data: { value: statistics[key] } }, `${key} ${formatMetric(statistics[key], unit)}`));
      drawMetricChart(canvas, answer.points, { start: layout.start_ns, end: layout.end_ns, min: counter.min, max: counter.max }, (value) => formatMetric(value, unit), width, 150);
      return h("figure", { class: "metric", data: { name: counter.name, pid }, style: { width: `${width}px` } }, canvas, caption);
    }),
  );
  holder.replaceChildren(h("h2", {}, "Metrics over time"), h("div", { class: "charts" }, ...figures));
}
