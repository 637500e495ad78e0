// Two runs compared: `opsight compare A B --format json` shown as a table per span name
// (verdicts from the Mann-Whitney U test, medians side by side) and as a differential
// flame graph of the merged trees: widths from B, slower paths red, faster blue.

import { apiFetch, type CompareRow, type Comparison } from "../api";
import { h } from "../dom";
import { formatCount, formatDuration } from "../format";
import { sortableTable } from "../table";
import { drawFlameGraph, type FlameNode } from "./flame_graph";

export function differenceColor(row: CompareRow): string {
  if (row.verdict === "slower") return "hsl(0, 70%, 62%)";
  if (row.verdict === "faster") return "hsl(215, 70%, 62%)";
  if (row.verdict === "only in B") return "hsl(0, 40%, 75%)";
  if (row.verdict === "only in A") return "hsl(215, 40%, 78%)";
  return "hsl(0, 0%, 80%)";
}

export async function comparePage(root: HTMLElement, a: string, b: string): Promise<void> {
  const comparison = await apiFetch<Comparison>("compare", { a, b });
  const median = (side: "a" | "b") => ({
    title: `median ${side.toUpperCase()}`,
    value: (row: CompareRow) => row[side]?.p50_ns ?? 0,
    render: (row: CompareRow) => (row[side] ? formatDuration(row[side]!.p50_ns) : "—"),
    numeric: true,
  });
  const table = sortableTable<CompareRow>(
    [
      { title: "name", value: (row) => row.name, className: "name" },
      { title: "verdict", value: (row) => row.verdict, render: (row) => h("span", { class: `verdict ${row.verdict.replace(/ /g, "-")}` }, row.verdict) },
      { title: "calls A", value: (row) => row.a?.count ?? 0, render: (row) => formatCount(row.a?.count ?? 0), numeric: true },
      { title: "calls B", value: (row) => row.b?.count ?? 0, render: (row) => formatCount(row.b?.count ?? 0), numeric: true },
      median("a"),
      median("b"),
      { title: "B/A median", value: (row) => row.median_ratio, render: (row) => (row.median_ratio ? `${row.median_ratio.toFixed(3)}×` : "—"), numeric: true },
      { title: "Δ total", value: (row) => row.total_delta_ns, render: (row) => formatDuration(row.total_delta_ns), numeric: true },
      { title: "p (Holm)", value: (row) => row.adjusted_p_value ?? 1, render: (row) => (row.adjusted_p_value === null ? "—" : row.adjusted_p_value.toPrecision(3)), numeric: true },
    ],
    comparison.names,
    { className: "data compare" },
  );
  table.id = "compare-table";
  const flame = h("canvas", { id: "diff-flame-graph" });
  const tooltip = h("p", { class: "hint", id: "diff-tooltip" }, "Widths: B's total time; red slower, blue faster (significant), grey same.");
  let focus: number | null = null;
  const nodes: FlameNode[] = comparison.tree.map((row) => ({
    name: row.name,
    parent: row.parent ?? null,
    value: row.b?.total_ns ?? row.a?.total_ns ?? 0,
    self: 0,
    color: differenceColor(row),
    label: `${row.name}: ${row.verdict}, median ${row.a ? formatDuration(row.a.p50_ns) : "—"} → ${row.b ? formatDuration(row.b.p50_ns) : "—"}`,
  }));
  const redraw = () =>
    drawFlameGraph(flame, nodes, {
      focus,
      width: Math.max(600, root.clientWidth - 20),
      onClick: (index) => {
        focus = index;
        redraw();
      },
      onHover: (index) => {
        tooltip.textContent = index === null ? "" : nodes[index].label;
      },
    });
  const side = (label: string, facts: Comparison["a"]) =>
    h("div", { class: "side" }, h("h3", {}, label), h("p", {}, `${formatCount(facts.slices)} slices, tracer overhead ${formatDuration(facts.overhead_ns)}, ${facts.events_dropped} events dropped`));
  root.replaceChildren(
    h("h1", {}, "Compare"),
    h("div", { class: "sides" }, side(`A: ${comparison.a.label}`, comparison.a), side(`B: ${comparison.b.label}`, comparison.b)),
    h("h2", {}, "Per span name"),
    table,
    h("h2", {}, "Differential flame graph"),
    flame,
    tooltip,
  );
  redraw();
}
