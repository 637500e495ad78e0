// LLM sweeps: the runs `opsight bench --generate --sweep ...` saved (tagged llm_bench=1,
// sweep=ID, one run per load point; docs/llm.md). #/llm lists the sweeps; #/llm/ID shows
// one: its points side by side (throughput, goodput, TTFT/TPOT/ITL/e2e p50 and p99 as the
// benchmark measured them, read from each run's "opsight bench --generate" span), the
// throughput-latency plot with its Pareto frontier, and the distributions of TTFT, ITL and
// e2e per point (the durations of the gen_ai.time_to_first_token, gen_ai.inter_token and
// gen_ai.request spans, through /latency).

import { apiFetch, runPath, type RunEntry, type SliceDetail, type SliceSummary } from "../api";
import type { HistogramBucket } from "../charts";
import { h } from "../dom";
import { formatDuration, formatUnixTime } from "../format";
import { routeHref } from "../router";

export const BENCH_SPAN = "opsight bench --generate";

// One load point of a sweep, as the page shows it.
export interface SweepPoint {
  run: RunEntry;
  key: string; // "concurrency" or "rate"
  value: number;
  figures: Record<string, number>; // the bench span's numeric attributes
}

export interface Sweep {
  id: string;
  model: string;
  key: string;
  runs: RunEntry[]; // by point, in the sweep's order
  created_unix_ns: number;
}

// The sweeps among `runs` (tagged llm_bench=1 and sweep=ID), newest first; each sweep's
// runs in the order the sweep ran them (tag point). Pure, tested.
export function groupSweeps(runs: RunEntry[]): Sweep[] {
  const sweeps = new Map<string, Sweep>();
  for (const run of runs) {
    const tags = run.tags ?? {};
    if (tags.llm_bench !== "1" || !tags.sweep) continue;
    let sweep = sweeps.get(tags.sweep);
    if (!sweep) {
      sweep = { id: tags.sweep, model: tags.model ?? "", key: "concurrency" in tags ? "concurrency" : "rate", runs: [], created_unix_ns: 0 };
      sweeps.set(tags.sweep, sweep);
    }
    sweep.runs.push(run);
    sweep.created_unix_ns = Math.max(sweep.created_unix_ns, run.created_unix_ns ?? 0);
  }
  for (const sweep of sweeps.values())
    sweep.runs.sort((a, b) => Number(a.tags?.point ?? 0) - Number(b.tags?.point ?? 0) || Number(a.tags?.[sweep.key] ?? 0) - Number(b.tags?.[sweep.key] ?? 0));
  return [...sweeps.values()].sort((a, b) => b.created_unix_ns - a.created_unix_ns);
}

// The Pareto-optimal points of (latency, throughput) pairs: no other point has both a
// latency as low and a throughput as high (one of them strictly). Returned by latency,
// lowest first; their throughputs rise. Pure, tested.
export function paretoFrontier<T extends { latency: number; throughput: number }>(points: T[]): T[] {
  const sorted = [...points].sort((a, b) => a.latency - b.latency || b.throughput - a.throughput);
  const frontier: T[] = [];
  for (const point of sorted)
    if (frontier.length === 0 || point.throughput > frontier[frontier.length - 1].throughput) frontier.push(point);
  return frontier;
}

function numeric(args: Record<string, unknown>): Record<string, number> {
  const figures: Record<string, number> = {};
  for (const [key, value] of Object.entries(args)) if (typeof value === "number") figures[key] = value;
  return figures;
}

async function pointOf(run: RunEntry, key: string): Promise<SweepPoint> {
  const found = await apiFetch<{ total: number; matches: SliceSummary[] }>(runPath(run.ref, "/search"), { q: BENCH_SPAN, limit: 10 });
  const match = found.matches.find((slice) => slice.name === BENCH_SPAN);
  const detail = match ? await apiFetch<SliceDetail>(runPath(run.ref, `/slices/${match.row}`)) : null;
  return { run, key, value: Number(run.tags?.[key] ?? NaN), figures: detail ? numeric(detail.args) : {} };
}

const COLORS = ["#4678c8", "#c84646", "#3a9a5b", "#b07d1c", "#8a4fc8", "#1c9aa8", "#c8589e", "#6b6b6b"];

function prepare(canvas: HTMLCanvasElement, width: number, height: number): CanvasRenderingContext2D | null {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const context = canvas.getContext("2d");
  context?.setTransform(ratio, 0, 0, ratio, 0, 0);
  return context;
}

const MARGIN = { left: 56, right: 16, top: 14, bottom: 32 };

// Output tokens/s against TTFT p50 (circles) and p99 (squares), the frontier over p99.
function drawPareto(canvas: HTMLCanvasElement, points: SweepPoint[], width = 640, height = 320): void {
  const context = prepare(canvas, width, height);
  if (!context) return;
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const usable = points.filter((point) => point.figures.output_tokens_per_second !== undefined && point.figures.ttft_p99_ns !== undefined);
  const maxX = Math.max(1, ...usable.map((point) => point.figures.ttft_p99_ns)) * 1.1;
  const maxY = Math.max(1, ...usable.map((point) => point.figures.output_tokens_per_second)) * 1.1;
  const xOf = (ns: number) => MARGIN.left + (ns / maxX) * plotWidth;
  const yOf = (value: number) => MARGIN.top + plotHeight - (value / maxY) * plotHeight;
  context.strokeStyle = "#999";
  context.beginPath();
  context.moveTo(MARGIN.left, MARGIN.top);
  context.lineTo(MARGIN.left, MARGIN.top + plotHeight);
  context.lineTo(MARGIN.left + plotWidth, MARGIN.top + plotHeight);
  context.stroke();
  const frontier = paretoFrontier(usable.map((point) => ({ point, latency: point.figures.ttft_p99_ns, throughput: point.figures.output_tokens_per_second })));
  if (frontier.length > 1) {
    context.strokeStyle = "#c84646";
    context.lineWidth = 2;
    context.beginPath();
    frontier.forEach((item, i) => (i === 0 ? context.moveTo(xOf(item.latency), yOf(item.throughput)) : context.lineTo(xOf(item.latency), yOf(item.throughput))));
    context.stroke();
  }
  context.font = "11px system-ui, sans-serif";
  for (const point of usable) {
    const y = yOf(point.figures.output_tokens_per_second);
    context.fillStyle = "#4678c8";
    if (point.figures.ttft_p50_ns !== undefined) {
      context.beginPath();
      context.arc(xOf(point.figures.ttft_p50_ns), y, 4, 0, 2 * Math.PI);
      context.fill();
    }
    context.fillStyle = "#c84646";
    context.fillRect(xOf(point.figures.ttft_p99_ns) - 4, y - 4, 8, 8);
    context.fillStyle = "#333";
    // The label right of its square, or left of it where it would leave the canvas.
    const label = `${point.key}=${point.value}`;
    const labelWidth = context.measureText(label).width;
    const x = xOf(point.figures.ttft_p99_ns);
    context.fillText(label, x + 7 + labelWidth <= width ? x + 7 : x - 7 - labelWidth, y + 4);
  }
  context.fillStyle = "#333";
  context.fillText(`${Math.round(maxY / 1.1)} tokens/s`, 4, MARGIN.top + 8);
  context.fillText("0", MARGIN.left - 10, MARGIN.top + plotHeight);
  const right = `TTFT ${formatDuration(maxX / 1.1)}`;
  context.fillText(right, width - MARGIN.right - context.measureText(right).width, height - 8);
  context.fillText("TTFT: p50 circles, p99 squares; red line: the Pareto frontier (p99)", MARGIN.left, height - 8);
}

interface LatencyAnswer {
  histogram: HistogramBucket[];
  cdf: { percent: number; duration_ns: number }[];
  distribution: { count: number };
}

// One CDF line per point (its color), on a shared duration axis.
function drawCdfs(canvas: HTMLCanvasElement, lines: ({ percent: number; duration_ns: number }[] | null)[], width = 420, height = 220): void {
  const context = prepare(canvas, width, height);
  if (!context) return;
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const all = lines.flatMap((line) => line ?? []);
  if (all.length === 0) return;
  const low = Math.min(...all.map((point) => point.duration_ns));
  const high = Math.max(...all.map((point) => point.duration_ns));
  const span = high - low || 1;
  context.strokeStyle = "#999";
  context.beginPath();
  context.moveTo(MARGIN.left, MARGIN.top);
  context.lineTo(MARGIN.left, MARGIN.top + plotHeight);
  context.lineTo(MARGIN.left + plotWidth, MARGIN.top + plotHeight);
  context.stroke();
  lines.forEach((line, index) => {
    if (!line) return;
    context.strokeStyle = COLORS[index % COLORS.length];
    context.lineWidth = 2;
    context.beginPath();
    line.forEach((point, i) => {
      const x = MARGIN.left + ((point.duration_ns - low) / span) * plotWidth;
      const y = MARGIN.top + plotHeight - (point.percent / 100) * plotHeight;
      if (i === 0) context.moveTo(x, y);
      else context.lineTo(x, y);
    });
    context.stroke();
  });
  context.fillStyle = "#333";
  context.font = "10px system-ui, sans-serif";
  context.fillText("100%", 4, MARGIN.top + 8);
  context.fillText(formatDuration(low), MARGIN.left, height - 10);
  const last = formatDuration(high);
  context.fillText(last, width - MARGIN.right - context.measureText(last).width, height - 10);
}

function cell(value: number | undefined, format: (value: number) => string): HTMLTableCellElement {
  return h("td", { class: "numeric" }, value === undefined || Number.isNaN(value) ? "-" : format(value));
}

const rate = (value: number) => value.toFixed(value >= 100 ? 0 : 2);

export async function llmPage(root: HTMLElement, sweepId?: string): Promise<void> {
  const answer = await apiFetch<{ runs: RunEntry[]; store_problem?: string }>("runs", { tag: "llm_bench=1" });
  const sweeps = groupSweeps(answer.runs);
  if (!sweepId) {
    if (!sweeps.length) {
      root.replaceChildren(
        h("h1", {}, "LLM sweeps"),
        h("p", { class: "hint", id: "llm-empty" }, answer.store_problem || "No sweep in the store yet: opsight bench --generate TARGET --sweep concurrency=1,2,4 saves one (docs/llm.md)."),
      );
      return;
    }
    const table = h("table", { class: "data", id: "llm-sweeps" });
    table.appendChild(h("thead", {}, h("tr", {}, h("th", {}, "sweep"), h("th", {}, "model"), h("th", {}, "points"), h("th", {}, "created (UTC)"))));
    const body = h("tbody");
    for (const sweep of sweeps)
      body.appendChild(
        h(
          "tr",
          { data: { sweep: sweep.id } },
          h("td", {}, h("a", { href: routeHref({ page: "llm", run: sweep.id }), class: "sweep-link" }, sweep.id)),
          h("td", {}, sweep.model),
          h("td", { class: "numeric" }, `${sweep.runs.length} (${sweep.key} ${sweep.runs.map((run) => run.tags?.[sweep.key]).join(", ")})`),
          h("td", {}, formatUnixTime(sweep.created_unix_ns)),
        ),
      );
    table.appendChild(body);
    root.replaceChildren(h("h1", {}, "LLM sweeps"), table);
    return;
  }
  const sweep = sweeps.find((candidate) => candidate.id === sweepId);
  if (!sweep) {
    root.replaceChildren(h("h1", {}, "LLM sweep"), h("p", { class: "error", id: "error" }, `no sweep ${sweepId} in the store (runs tagged sweep=${sweepId})`));
    return;
  }
  const points = await Promise.all(sweep.runs.map((run) => pointOf(run, sweep.key)));

  const table = h("table", { class: "data", id: "llm-points" });
  const headers = [sweep.key, "run", "requests", "requests/s", "output tokens/s", "goodput req/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99", "e2e p50", "e2e p99"];
  table.appendChild(h("thead", {}, h("tr", {}, ...headers.map((text, i) => h("th", { class: i > 2 ? "numeric" : "" }, text)))));
  const body = h("tbody");
  points.forEach((point, index) => {
    const f = point.figures;
    body.appendChild(
      h(
        "tr",
        { data: { value: point.value, throughput: f.output_tokens_per_second ?? "", ttftP99: f.ttft_p99_ns ?? "" } },
        h("td", {}, h("i", { class: "swatch", style: { background: COLORS[index % COLORS.length], display: "inline-block", width: "10px", height: "10px" } }), ` ${point.value}`),
        h("td", {}, h("a", { href: routeHref({ page: "overview", run: point.run.ref }), class: "run-link" }, point.run.ref)),
        // Each request's token timeline: its gen_ai.request lane (TTFT, queue, one span per ITL).
        h("td", {}, h("a", { href: routeHref({ page: "timeline", run: point.run.ref, query: { q: "gen_ai.request" } }), class: "timeline-link" }, "token timelines")),
        cell(f.requests_per_second, rate),
        cell(f.output_tokens_per_second, rate),
        cell(f.goodput_requests_per_second, rate),
        ...["ttft", "tpot", "itl", "e2e"].flatMap((metric) => [cell(f[`${metric}_p50_ns`], formatDuration), cell(f[`${metric}_p99_ns`], formatDuration)]),
      ),
    );
  });
  table.appendChild(body);

  const pareto = h("canvas", { id: "llm-pareto" });
  const distributions = h("div", { class: "distributions", id: "llm-distributions", style: { display: "flex", flexWrap: "wrap", gap: "16px" } });
  root.replaceChildren(
    h("h1", {}, `LLM sweep ${sweep.id}`),
    h("p", { class: "hint" }, `${sweep.model}: ${points.length} points over ${sweep.key}. The table is each point's summary as opsight bench --generate measured it (steady state only); the distributions are every request recorded in the point's run.`),
    table,
    h("h2", {}, "Throughput and latency"),
    pareto,
    h("h2", {}, "Distributions (CDF per point)"),
    distributions,
  );
  drawPareto(pareto, points);
  for (const [title, span] of [
    ["TTFT", "gen_ai.time_to_first_token"],
    ["ITL", "gen_ai.inter_token"],
    ["e2e", "gen_ai.request"],
  ]) {
    const lines = await Promise.all(
      points.map((point) => apiFetch<LatencyAnswer>(runPath(point.run.ref, "/latency"), { name: span, buckets: 40 }).then((found) => found.cdf).catch(() => null)),
    );
    const canvas = h("canvas", { data: { metric: title, lines: lines.filter((line) => line !== null).length } });
    distributions.appendChild(h("figure", { class: "distribution" }, h("figcaption", {}, `${title} (${span} spans)`), canvas));
    drawCdfs(canvas, lines);
  }
  distributions.appendChild(
    h("p", { class: "hint" }, "TPOT is one value per request (not a span): its p50 and p99 are in the table."),
  );
}
