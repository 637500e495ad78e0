// A run's overview: its metadata (command, git, host, CPU, GPU, versions, tags), the
// tracer's overhead and drops, the percentile summary (`opsight report --summary`'s JSON),
// and for the span name selected in it a latency histogram and CDF.

import { apiFetch, runPath, type RunDetail, type SummaryRow } from "../api";
import { drawCdf, drawHistogram, type HistogramBucket } from "../charts";
import { h } from "../dom";
import { formatCount, formatDuration, formatShare, formatUnixTime } from "../format";
import { routeHref } from "../router";
import { sortableTable } from "../table";

interface LatencyAnswer {
  name: string;
  histogram: HistogramBucket[];
  cdf: { percent: number; duration_ns: number }[];
  distribution: { count: number; p50_ns: number; p99_ns: number };
}

export function runTabs(run: string, current: string): HTMLElement {
  const tab = (page: "overview" | "timeline" | "tree" | "details", title: string) =>
    h("a", { href: routeHref({ page, run }), class: page === current ? "tab current" : "tab" }, title);
  return h("nav", { class: "tabs" }, tab("overview", "Overview"), tab("timeline", "Timeline"), tab("tree", "Call tree / flame graph"), tab("details", "Latency details"));
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
      { title: "name", value: (row) => row.name },
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
  );
  const first = query.name ?? summary[0]?.name;
  if (first !== undefined) await select(first);
}
