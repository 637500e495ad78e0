// The merged call tree (`opsight report --merged-tree`'s JSON: one node per code path with
// count, total, self and percentiles) as an indented table that opens a few levels deep,
// children by total time (or as they ran), with a name filter and expand/collapse all; and
// beside it the same tree as a flame graph (roots at the bottom) and an icicle (roots on
// top), inclusive or self widths. A click on a frame or on a row's name selects that code
// path in all three: both graphs zoom into it and the table marks it. Everything set is in
// the URL (tree_state.ts). Below, the icicle of one single root (HiQ's call graph; `opsight
// report --tree`'s roots): pick a root call, see its calls nested, widths its calls'
// durations.

import { apiFetch, runPath, type RunDetail, type TreeNode } from "../api";
import { h } from "../dom";
import { formatCount, formatDuration, formatShare } from "../format";
import { runTabs } from "./overview";
import { drawFlameGraph, nodesOfCall, type CallNode, type FlameNode } from "./flame_graph";
import { routeHref } from "../router";
import { displayOrder, isCollapsed, queryOfState, stateFromQuery, toggledForAll, visibleRows } from "./tree_state";

interface MergedTree {
  nodes: TreeNode[];
}

export async function treePage(root: HTMLElement, run: string, query: Record<string, string> = {}): Promise<void> {
  const [tree, detail] = await Promise.all([apiFetch<MergedTree>(runPath(run, "/report/merged_tree")), apiFetch<RunDetail>(runPath(run))]);
  const nodes = tree.nodes;
  const state = stateFromQuery(query, nodes.length);
  const kept: Record<string, string> = query.root !== undefined ? { root: query.root } : {};
  const saveState = () => history.replaceState(null, "", routeHref({ page: "tree", run, query: queryOfState(state, kept) }));

  const graphWidth = Math.max(300, Math.floor((root.clientWidth - 36) / 2));
  const flame = h("canvas", { id: "flame-graph", title: "flame graph: roots at the bottom" });
  const icicle = h("canvas", { id: "icicle", title: "icicle: roots on top" });
  const tooltip = h("p", { id: "flame-tooltip", class: "hint" }, "Click a frame (or a row's name) to select it in both graphs and the table; click it again to go up one level.");
  const widths = h("select", { id: "flame-mode" }, h("option", { value: "total" }, "inclusive"), h("option", { value: "self" }, "self"));
  widths.value = state.selfWidths ? "self" : "total";
  const order = h("select", { id: "tree-order" }, h("option", { value: "total" }, "by total time"), h("option", { value: "run" }, "as they ran"));
  order.value = state.order;
  const filter = h("input", { id: "tree-filter", type: "search", placeholder: "filter by name", value: state.filter });
  const matches = h("span", { id: "tree-matches", class: "hint" });
  const flameNodes: FlameNode[] = nodes.map((node) => ({
    name: node.name,
    parent: node.parent,
    value: node.total_ns,
    self: node.self_ns,
    label: `${node.name}: ${formatDuration(node.total_ns)} total, ${formatDuration(node.self_ns)} self, ${formatCount(node.count)} calls, p99 ${formatDuration(node.p99_ns)}`,
  }));
  const redrawGraphs = () => {
    for (const [canvas, isFlame] of [
      [flame, true],
      [icicle, false],
    ] as const) {
      drawFlameGraph(canvas, flameNodes, {
        focus: state.focus,
        width: graphWidth,
        selfMode: state.selfWidths,
        flame: isFlame,
        onClick: (index) => select(index),
        onHover: (index) => {
          tooltip.textContent = index === null ? "" : flameNodes[index].label;
        },
      });
    }
  };

  const table = h("table", { class: "data tree", id: "tree-table" });
  table.appendChild(
    h(
      "thead",
      {},
      h("tr", {}, ...["code path", "count", "calls/parent", "total", "self", "mean", "p50", "p90", "p99", "max", "of parent"].map((title, i) => h("th", { class: i ? "numeric" : "" }, title))),
    ),
  );
  const body = h("tbody");
  const rowsOf: HTMLTableRowElement[] = [];
  const hasChildren = nodes.map(() => false);
  nodes.forEach((node) => {
    if (node.parent !== null && node.parent !== undefined) hasChildren[node.parent] = true;
  });
  nodes.forEach((node, index) => {
    const toggle = hasChildren[index]
      ? h(
          "button",
          {
            class: "toggle",
            title: "open or shut",
            on: {
              click: () => {
                if (state.toggled.has(index)) state.toggled.delete(index);
                else state.toggled.add(index);
                refreshRows();
                saveState();
              },
            },
          },
          "▾",
        )
      : h("span", { class: "toggle-space" });
    const name = h("button", { class: "link node-name", title: "select in both graphs", on: { click: () => select(index === state.focus ? (node.parent ?? null) : index) } }, node.name);
    const cell = (value: number, text: string) => h("td", { class: "numeric", data: { value } }, text);
    rowsOf.push(
      h(
        "tr",
        { data: { index } },
        h("td", { style: { paddingLeft: `${node.depth * 16 + 4}px` } }, toggle, " ", name),
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
      ),
    );
  });
  const placeRows = () => body.replaceChildren(...displayOrder(nodes, state.order).map((index) => rowsOf[index]));
  function refreshRows(): void {
    const visible = visibleRows(nodes, state);
    const filtering = state.filter.trim() !== "";
    let shown = 0;
    nodes.forEach((node, index) => {
      const row = rowsOf[index];
      row.hidden = !visible.has(index);
      if (!row.hidden) shown += 1;
      row.classList.toggle("selected", index === state.focus);
      row.classList.toggle("match", filtering && node.name.toLowerCase().includes(state.filter.trim().toLowerCase()));
      const toggle = row.querySelector("button.toggle");
      if (toggle) toggle.textContent = isCollapsed(nodes, index, state) && !filtering ? "▸" : "▾";
    });
    const matched = filtering ? nodes.filter((node) => node.name.toLowerCase().includes(state.filter.trim().toLowerCase())).length : 0;
    matches.textContent = filtering ? `${formatCount(matched)} of ${formatCount(nodes.length)} code paths match (${formatCount(shown)} rows with their callers)` : `${formatCount(shown)} of ${formatCount(nodes.length)} code paths shown`;
    matches.dataset.matched = String(matched);
  }
  // Selects a code path everywhere: both graphs zoom into it, its row is marked, opened to
  // and scrolled to.
  function select(index: number | null): void {
    state.focus = index;
    if (index !== null) {
      for (let parent = nodes[index].parent; parent !== null && parent !== undefined; parent = nodes[parent].parent) {
        if (isCollapsed(nodes, parent, state)) {
          if (state.toggled.has(parent)) state.toggled.delete(parent);
          else state.toggled.add(parent);
        }
      }
    }
    redrawGraphs();
    refreshRows();
    if (index !== null && !rowsOf[index].hidden) rowsOf[index].scrollIntoView?.({ block: "nearest" });
    saveState();
  }
  widths.addEventListener("change", () => {
    state.selfWidths = widths.value === "self";
    redrawGraphs();
    saveState();
  });
  order.addEventListener("change", () => {
    state.order = order.value === "run" ? "run" : "total";
    placeRows();
    saveState();
  });
  filter.addEventListener("input", () => {
    state.filter = filter.value;
    refreshRows();
    saveState();
  });
  const expandAll = h("button", { id: "tree-expand-all", on: { click: () => setAll(true) } }, "expand all");
  const collapseAll = h("button", { id: "tree-collapse-all", on: { click: () => setAll(false) } }, "collapse all");
  function setAll(open: boolean): void {
    state.toggled = toggledForAll(nodes, state.depth, open);
    refreshRows();
    saveState();
  }

  const rootHolder = h("section", { id: "root-icicle-section" });
  table.appendChild(body);
  root.replaceChildren(
    h("h1", {}, "Call tree ", h("span", { id: "tree-run", class: "hint" }, `of ${detail.label || run}`)),
    runTabs(run, "tree"),
    h("div", { class: "toolbar" }, h("label", {}, "widths: ", widths)),
    h(
      "div",
      { class: "flame-pair", style: { display: "flex", gap: "16px", alignItems: "flex-start", flexWrap: "wrap" } },
      h("figure", { style: { margin: "0" } }, h("figcaption", { class: "hint" }, "flame graph (callers below)"), flame),
      h("figure", { style: { margin: "0" } }, h("figcaption", { class: "hint" }, "icicle (callers above)"), icicle),
    ),
    tooltip,
    h("h2", {}, "Merged call tree"),
    h("div", { class: "toolbar" }, filter, " ", h("label", {}, "children: ", order), " ", expandAll, " ", collapseAll, " ", matches),
    table,
    rootHolder,
  );
  placeRows();
  refreshRows();
  redrawGraphs();
  await showRootIcicle(rootHolder, run, query, Math.max(600, root.clientWidth - 20), (root) => {
    kept.root = root;
    saveState();
  });
}

interface CallTreeReport {
  roots: CallNode[];
  roots_omitted: number;
}

async function showRootIcicle(holder: HTMLElement, run: string, query: Record<string, string>, width: number, onChoose: (root: string) => void): Promise<void> {
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
    onChoose(select.value);
    draw();
  });
  draw();
}
