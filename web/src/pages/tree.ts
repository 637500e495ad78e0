// The merged call tree (`opsight report --merged-tree`'s JSON: one node per code path with
// count, total, self and percentiles) as an indented table, and as a flame graph (an
// icicle, roots on top) in which a click zooms into a node; inclusive or self widths. Below,
// the icicle of one single root (HiQ's call graph; `opsight report --tree`'s roots): pick a
// root call, see its calls nested, widths its calls' durations.

import { apiFetch, runPath, type TreeNode } from "../api";
import { h } from "../dom";
import { formatCount, formatDuration, formatShare } from "../format";
import { runTabs } from "./overview";
import { drawFlameGraph, nodesOfCall, type CallNode, type FlameNode } from "./flame_graph";
import { routeHref } from "../router";

interface MergedTree {
  nodes: TreeNode[];
}

export async function treePage(root: HTMLElement, run: string, query: Record<string, string> = {}): Promise<void> {
  const tree = await apiFetch<MergedTree>(runPath(run, "/report/merged_tree"));
  const nodes = tree.nodes;
  const flame = h("canvas", { id: "flame-graph" });
  const tooltip = h("p", { id: "flame-tooltip", class: "hint" }, "Click a frame to zoom into it; click the top bar to zoom out.");
  const mode = h("select", { id: "flame-mode" }, h("option", { value: "total" }, "inclusive"), h("option", { value: "self" }, "self"));
  let focus: number | null = null;
  const redraw = () => {
    const flameNodes: FlameNode[] = nodes.map((node) => ({
      name: node.name,
      parent: node.parent,
      value: mode.value === "self" ? node.self_ns : node.total_ns,
      self: node.self_ns,
      color: undefined,
      label: `${node.name}: ${formatDuration(node.total_ns)} total, ${formatDuration(node.self_ns)} self, ${formatCount(node.count)} calls, p99 ${formatDuration(node.p99_ns)}`,
    }));
    drawFlameGraph(flame, flameNodes, {
      focus,
      width: Math.max(600, root.clientWidth - 20),
      selfMode: mode.value === "self",
      onClick: (index) => {
        focus = index;
        redraw();
      },
      onHover: (index) => {
        tooltip.textContent = index === null ? "" : flameNodes[index].label;
      },
    });
  };
  mode.addEventListener("change", redraw);

  const rootHolder = h("section", { id: "root-icicle-section" });
  const table = h("table", { class: "data tree", id: "tree-table" });
  table.appendChild(
    h(
      "thead",
      {},
      h("tr", {}, ...["code path", "count", "calls/parent", "total", "self", "mean", "p50", "p90", "p99", "max", "of parent"].map((title, i) => h("th", { class: i ? "numeric" : "" }, title))),
    ),
  );
  const body = h("tbody");
  const collapsed = new Set<number>();
  const rowsOf: HTMLTableRowElement[] = [];
  nodes.forEach((node, index) => {
    const hasChildren = index + 1 < nodes.length && nodes[index + 1].parent === index;
    const toggle = hasChildren
      ? h("button", { class: "toggle", on: { click: () => { if (collapsed.has(index)) collapsed.delete(index); else collapsed.add(index); refresh(); } } }, "▾")
      : h("span", { class: "toggle-space" });
    const cell = (value: number, text: string) => h("td", { class: "numeric", data: { value } }, text);
    const row = h(
      "tr",
      { data: { index } },
      h("td", { style: { paddingLeft: `${node.depth * 16 + 4}px` } }, toggle, " ", node.name),
      cell(node.count, formatCount(node.count)),
      cell(node.calls_per_parent_call, node.calls_per_parent_call.toFixed(1)),
      cell(node.total_ns, formatDuration(node.total_ns)),
      cell(node.self_ns, formatDuration(node.self_ns)),
      cell(node.mean_ns, formatDuration(node.mean_ns)),
      cell(node.p50_ns, formatDuration(node.p50_ns)),
      cell(node.p90_ns, formatDuration(node.p90_ns)),
      cell(node.p99_ns, formatDuration(node.p99_ns)),
      cell(node.max_ns, formatDuration(node.max_ns)),
      cell(node.share_of_parent, formatShare(node.share_of_parent)),
    );
    rowsOf.push(row);
    body.appendChild(row);
  });
  function refresh(): void {
    nodes.forEach((node, index) => {
      let hidden = false;
      for (let parent = node.parent; parent !== null && parent !== undefined; parent = nodes[parent].parent)
        if (collapsed.has(parent)) hidden = true;
      rowsOf[index].hidden = hidden;
      const toggle = rowsOf[index].querySelector("button.toggle");
      if (toggle) toggle.textContent = collapsed.has(index) ? "▸" : "▾";
    });
  }
  table.appendChild(body);
  root.replaceChildren(
    h("h1", {}, "Call tree"),
    runTabs(run, "tree"),
    h("div", { class: "toolbar" }, h("label", {}, "flame graph widths: ", mode)),
    flame,
    tooltip,
    h("h2", {}, "Merged call tree"),
    table,
    rootHolder,
  );
  redraw();
  await showRootIcicle(rootHolder, run, query, Math.max(600, root.clientWidth - 20));
}

interface CallTreeReport {
  roots: CallNode[];
  roots_omitted: number;
}

async function showRootIcicle(holder: HTMLElement, run: string, query: Record<string, string>, width: number): Promise<void> {
  const report = await apiFetch<CallTreeReport>(runPath(run, "/report/tree"));
  if (!report.roots.length) return;
  const select = h("select", { id: "root-select" });
  report.roots.forEach((call, index) =>
    select.appendChild(h("option", { value: String(index) }, `${call.name} at ${formatDuration(call.start_ns)} (${formatDuration(call.dur_ns)})${call.track ? ` on ${call.track}` : ""}`)),
  );
  const chosen = Math.min(report.roots.length - 1, Math.max(0, Number(query.root ?? 0) || 0));
  select.value = String(chosen);
  const canvas = h("canvas", { id: "root-icicle" });
  const tooltip = h("p", { id: "root-tooltip", class: "hint" }, "Hover a call for its times; click to zoom into it.");
  const omitted = report.roots_omitted ? h("p", { class: "hint" }, `the longest ${report.roots.length} roots of the run (${report.roots_omitted} more left out)`) : "";
  holder.replaceChildren(h("h2", {}, "One call's icicle"), h("div", { class: "toolbar" }, h("label", {}, "root call: ", select)), omitted, canvas, tooltip);
  let focus: number | null = null;
  const draw = () => {
    const call = report.roots[Number(select.value)];
    const nodes = nodesOfCall(call, (node) => `${node.name}: ${formatDuration(node.dur_ns)}, self ${formatDuration(node.self_ns)}, at ${formatDuration(node.start_ns)}${node.descendants_omitted ? ` (+${node.descendants_omitted} nested left out)` : ""}`);
    canvas.dataset.rootDurNs = String(call.dur_ns);
    canvas.dataset.calls = String(nodes.length);
    drawFlameGraph(canvas, nodes, {
      focus,
      width,
      onClick: (index) => {
        focus = index;
        draw();
      },
      onHover: (index) => {
        tooltip.textContent = index === null ? "" : nodes[index].label;
      },
    });
  };
  select.addEventListener("change", () => {
    focus = null;
    history.replaceState(null, "", routeHref({ page: "tree", run, query: { root: select.value } }));
    draw();
  });
  draw();
}
