// Latency details of a run: the operator table (`opsight report --ops`'s JSON) and the
// per-inference breakdown of a chosen span (`--breakdown SPAN`): each phase's share of an
// inference as a stacked bar, a stacked bar per single inference (/inferences: its phases'
// times, whose means are the report's), and the phases' percentile table.

import { apiFetch, runPath, type InferencesAnswer, type Statistics, type SummaryRow } from "../api";
import { drawInferenceBars } from "../charts";
import { h } from "../dom";
import { formatCount, formatDuration, formatShare } from "../format";
import { routeHref } from "../router";
import { sortableTable } from "../table";
import { colorOf } from "../timeline/layout";
import { runTabs } from "./overview";

interface OperatorRow extends Statistics {
  name: string;
  category: string;
  self_ns: number;
  share: number;
}

type HostDeviceFigure = Statistics & { present_in: number; share_of_host: number };

interface Breakdown {
  span: string;
  inference_count: number;
  inferences_per_second: number;
  total: Statistics;
  phases: (Statistics & { phase: string; share_of_mean: number; present_in: number; uncovered: boolean })[];
  // Only for a trace with GPU work (opsight report --breakdown, docs/gpu.md).
  host_device?: { inferences_with_gpu_work: number } & Record<string, HostDeviceFigure | number>;
}

// The host/device split's figures, in the order and with the words of the text report.
const HOST_DEVICE_ROWS: [string, string][] = [
  ["host", "host (the span)"],
  ["launch_overhead", "launch overhead (CUDA API)"],
  ["synchronize", "synchronize (waiting for the GPU)"],
  ["gpu_busy", "GPU busy"],
  ["gpu_idle", "GPU idle gaps"],
  ["host_to_device", "HtoD copies"],
  ["device_to_host", "DtoH copies"],
];

// Per inference, where the time of a GPU inference goes between host and device.
function hostDeviceTable(split: NonNullable<Breakdown["host_device"]>): HTMLElement {
  type Row = HostDeviceFigure & { label: string };
  const rows: Row[] = [];
  for (const [key, label] of HOST_DEVICE_ROWS) {
    const figure = split[key];
    if (figure && typeof figure === "object") rows.push({ ...figure, label });
  }
  const duration = (title: string, value: (row: Row) => number) => ({ title, value, render: (row: Row) => formatDuration(value(row)), numeric: true });
  const table = sortableTable<Row>(
    [
      { title: "figure", value: (row) => row.label },
      { title: "in inferences", value: (row) => row.present_in, numeric: true },
      { title: "of the host time", value: (row) => row.share_of_host, render: (row) => formatShare(row.share_of_host), numeric: true },
      duration("mean", (row) => row.mean_ns),
      duration("p50", (row) => row.p50_ns),
      duration("p99", (row) => row.p99_ns),
      duration("max", (row) => row.max_ns),
    ],
    rows,
    { className: "data host-device" },
  );
  table.id = "host-device-table";
  return h("div", {}, h("h3", {}, `Host and device (${formatCount(split.inferences_with_gpu_work)} inferences with GPU work)`), table);
}

export async function detailsPage(root: HTMLElement, run: string, query: Record<string, string>): Promise<void> {
  const [operators, summary] = await Promise.all([
    apiFetch<{ operators: OperatorRow[]; operator_slices: number; total_self_ns: number }>(runPath(run, "/report/operators")),
    apiFetch<SummaryRow[]>(runPath(run, "/report/summary")),
  ]);
  const duration = <T,>(title: string, value: (row: T) => number) => ({ title, value, render: (row: T) => formatDuration(value(row)), numeric: true });
  const operatorTable = operators.operators.length
    ? sortableTable<OperatorRow>(
        [
          { title: "operator", value: (row) => row.name, className: "name" },
          { title: "category", value: (row) => row.category },
          { title: "count", value: (row) => row.count, render: (row) => formatCount(row.count), numeric: true },
          duration<OperatorRow>("self", (row) => row.self_ns),
          { title: "share", value: (row) => row.share, render: (row) => formatShare(row.share), numeric: true },
          duration<OperatorRow>("total", (row) => row.total_ns),
          duration<OperatorRow>("mean", (row) => row.mean_ns),
          duration<OperatorRow>("p50", (row) => row.p50_ns),
          duration<OperatorRow>("p99", (row) => row.p99_ns),
          duration<OperatorRow>("max", (row) => row.max_ns),
        ],
        operators.operators,
        { className: "data operators" },
      )
    : h("p", { class: "hint" }, "No operators in this run (spans of category operator or gpu_kernel).");
  if (operatorTable instanceof HTMLTableElement) operatorTable.id = "operators-table";

  const spanSelect = h("select", { id: "breakdown-span" });
  for (const row of summary) spanSelect.appendChild(h("option", { value: row.name }, row.name));
  const chosen = query.span ?? summary[0]?.name ?? "";
  spanSelect.value = chosen;
  const breakdownHolder = h("section", { id: "breakdown" });
  spanSelect.addEventListener("change", () => {
    location.hash = routeHref({ page: "details", run, query: { span: spanSelect.value } });
  });
  root.replaceChildren(
    h("h1", {}, "Latency details"),
    runTabs(run, "details"),
    h("h2", {}, `Operators (${formatCount(operators.operator_slices)} slices, ${formatDuration(operators.total_self_ns)} self)`),
    operatorTable,
    h("h2", {}, "Per-inference breakdown"),
    h("div", { class: "toolbar" }, h("label", {}, "one inference is a span named ", spanSelect)),
    breakdownHolder,
  );
  if (!chosen) return;
  const [breakdown, inferences] = await Promise.all([
    apiFetch<Breakdown>(runPath(run, "/report/breakdown"), { span: chosen }),
    apiFetch<InferencesAnswer>(runPath(run, "/inferences"), { span: chosen }).catch(() => null),
  ]);
  const bar = h("div", { class: "stacked-bar", id: "breakdown-bar" });
  for (const phase of breakdown.phases) {
    if (phase.share_of_mean <= 0) continue;
    bar.appendChild(
      h("span", {
        title: `${phase.phase}: ${formatShare(phase.share_of_mean)} of a mean inference, mean ${formatDuration(phase.mean_ns)}`,
        style: { width: `${Math.min(100, phase.share_of_mean * 100)}%`, background: colorOf(phase.phase) },
        data: { phase: phase.phase },
      }),
    );
  }
  const legend = h("p", { class: "legend" }, ...breakdown.phases.map((phase) => h("span", {}, h("i", { style: { background: colorOf(phase.phase) } }), ` ${phase.phase} `)));
  const table = sortableTable<Breakdown["phases"][number]>(
    [
      { title: "phase", value: (row) => row.phase, className: "name" },
      { title: "in inferences", value: (row) => row.present_in, numeric: true },
      { title: "share of mean", value: (row) => row.share_of_mean, render: (row) => formatShare(row.share_of_mean), numeric: true },
      duration("mean", (row) => row.mean_ns),
      duration("p50", (row) => row.p50_ns),
      duration("p90", (row) => row.p90_ns),
      duration("p99", (row) => row.p99_ns),
      duration("max", (row) => row.max_ns),
    ],
    breakdown.phases,
    { className: "data breakdown" },
  );
  table.id = "breakdown-table";
  const perInference = h("section", { id: "inference-bars" });
  breakdownHolder.replaceChildren(
    h("p", {}, `${formatCount(breakdown.inference_count)} inferences (${breakdown.inferences_per_second.toFixed(1)}/s), mean ${formatDuration(breakdown.total.mean_ns)}, p99 ${formatDuration(breakdown.total.p99_ns)}`),
    h("h3", {}, "A mean inference"),
    bar,
    legend,
    perInference,
    h("h3", {}, "Phases over the inferences"),
    table,
    breakdown.host_device ? hostDeviceTable(breakdown.host_device) : "",
  );
  if (inferences && inferences.inferences.length) showInferences(perInference, run, inferences);
}

declare global {
  interface Window {
    opsightInferences?: InferencesAnswer;
  }
}

// One stacked bar per single inference; hovering one names its phases' times, a click
// opens it on the timeline.
function showInferences(holder: HTMLElement, run: string, answer: InferencesAnswer): void {
  window.opsightInferences = answer;
  const canvas = h("canvas", { id: "inference-chart", data: { count: answer.inferences.length } });
  const tooltip = h("p", { id: "inference-tooltip", class: "hint" }, "Hover a bar for its phases; click it to see it on the timeline.");
  const shown = answer.inferences.length < answer.inference_count ? ` (the first ${formatCount(answer.inferences.length)})` : "";
  holder.replaceChildren(h("h3", {}, `Each inference${shown}`), canvas, tooltip);
  const colors = answer.phases.map((phase) => colorOf(phase));
  // As wide as the page's content (the section is a block: its parent's width).
  const width = Math.max(600, Math.floor(holder.getBoundingClientRect().width || 900));
  const layout = drawInferenceBars(canvas, answer.inferences, colors, width, 240);
  canvas.dataset.plotWidth = String(layout.plotWidth);
  canvas.dataset.barsWidth = String(layout.barWidth * answer.inferences.length);
  const indexAt = (event: MouseEvent) => {
    const index = Math.floor((event.offsetX - layout.left) / layout.barWidth);
    return index >= 0 && index < answer.inferences.length ? index : null;
  };
  canvas.addEventListener("mousemove", (event) => {
    const index = indexAt(event);
    if (index === null) return;
    const inference = answer.inferences[index];
    const parts = answer.phases.map((phase, i) => `${phase} ${formatDuration(inference.phases[i])}`).filter((_, i) => inference.phases[i] > 0);
    tooltip.dataset.index = String(index);
    tooltip.textContent = `inference ${index + 1}: ${formatDuration(inference.dur)} = ${parts.join(" + ")}`;
  });
  canvas.addEventListener("click", (event) => {
    const index = indexAt(event);
    if (index === null) return;
    const inference = answer.inferences[index];
    const margin = Math.max(1, Math.round(inference.dur * 0.05));
    location.hash = routeHref({ page: "timeline", run, query: { start: inference.ts - margin, end: inference.ts + inference.dur + margin, slice: inference.row } });
  });
}
