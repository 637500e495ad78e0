// The call tree page's state and the pure arithmetic behind it: the order rows show in
// (children by total time, or in the order they ran), which rows are open at a given
// depth, which rows a name filter keeps (the matches and their ancestors), and the page's
// URL parameters, so that a link brings back exactly what a user set.

export interface TreeRow {
  name: string;
  parent: number | null;
  depth: number;
  total_ns: number;
}

export type RowOrder = "total" | "run";

export interface TreeViewState {
  order: RowOrder;
  depth: number; // levels shown at first: rows at depth (depth - 1) and deeper start shut
  toggled: Set<number>; // rows whose open/closed state differs from the depth's
  filter: string;
  focus: number | null; // the node both graphs zoom into and the table marks
  selfWidths: boolean;
}

export const DEFAULT_OPEN_DEPTH = 3;

export function childrenOf(rows: TreeRow[]): number[][] {
  const children: number[][] = rows.map(() => []);
  rows.forEach((row, index) => {
    if (row.parent !== null && row.parent !== undefined && children[row.parent]) children[row.parent].push(index);
  });
  return children;
}

// Depth first, each node's children by total time (largest first; ties in run order) or in
// the order they first ran (the report's order).
export function displayOrder(rows: TreeRow[], order: RowOrder): number[] {
  const children = childrenOf(rows);
  const roots = rows.flatMap((row, index) => (row.parent === null || row.parent === undefined ? [index] : []));
  const sorted = (list: number[]) => (order === "total" ? [...list].sort((a, b) => rows[b].total_ns - rows[a].total_ns || a - b) : list);
  const out: number[] = [];
  const stack = sorted(roots).reverse();
  while (stack.length) {
    const index = stack.pop() as number;
    out.push(index);
    const next = sorted(children[index]);
    for (let i = next.length - 1; i >= 0; i -= 1) stack.push(next[i]);
  }
  return out;
}

export function isCollapsed(rows: TreeRow[], index: number, state: Pick<TreeViewState, "depth" | "toggled">): boolean {
  const collapsedByDepth = rows[index].depth >= state.depth - 1;
  return state.toggled.has(index) ? !collapsedByDepth : collapsedByDepth;
}

// The rows shown: without a filter, those whose every ancestor is open; with one, the rows
// whose name holds it (any case) and their ancestors, whatever is collapsed.
export function visibleRows(rows: TreeRow[], state: Pick<TreeViewState, "depth" | "toggled" | "filter">): Set<number> {
  const visible = new Set<number>();
  const needle = state.filter.trim().toLowerCase();
  if (needle) {
    rows.forEach((row, index) => {
      if (!row.name.toLowerCase().includes(needle)) return;
      for (let at: number | null = index; at !== null && at !== undefined && !visible.has(at); at = rows[at].parent) visible.add(at);
    });
    return visible;
  }
  rows.forEach((row, index) => {
    const parent = row.parent;
    if (parent === null || parent === undefined || (visible.has(parent) && !isCollapsed(rows, parent, state))) visible.add(index);
  });
  return visible;
}

// Rows before their children (the API's order) is what visibleRows relies on.
export function parentsComeFirst(rows: TreeRow[]): boolean {
  return rows.every((row, index) => row.parent === null || row.parent === undefined || row.parent < index);
}

// Every row open, or every row shut: as toggles against the current depth.
export function toggledForAll(rows: TreeRow[], depth: number, open: boolean): Set<number> {
  const toggled = new Set<number>();
  rows.forEach((row, index) => {
    const collapsedByDepth = row.depth >= depth - 1;
    if (collapsedByDepth === open) toggled.add(index);
  });
  return toggled;
}

export function stateFromQuery(query: Record<string, string>, rowCount: number): TreeViewState {
  const depth = Number(query.depth);
  const focus = query.focus === undefined || query.focus === "" ? NaN : Number(query.focus);
  const toggled = new Set<number>();
  for (const part of (query.x ?? "").split(",")) {
    if (part === "") continue;
    const index = Number(part);
    if (Number.isInteger(index) && index >= 0 && index < rowCount) toggled.add(index);
  }
  return {
    order: query.order === "run" ? "run" : "total",
    depth: Number.isInteger(depth) && depth >= 1 && depth <= 1000 ? depth : DEFAULT_OPEN_DEPTH,
    toggled,
    filter: query.filter ?? "",
    focus: Number.isInteger(focus) && focus >= 0 && focus < rowCount ? focus : null,
    selfWidths: query.widths === "self",
  };
}

// Only what differs from the defaults, so a plain link stays plain.
export function queryOfState(state: TreeViewState, extra: Record<string, string> = {}): Record<string, string> {
  const query: Record<string, string> = { ...extra };
  if (state.order !== "total") query.order = state.order;
  if (state.depth !== DEFAULT_OPEN_DEPTH) query.depth = String(state.depth);
  if (state.toggled.size) query.x = [...state.toggled].sort((a, b) => a - b).join(",");
  if (state.filter) query.filter = state.filter;
  if (state.focus !== null) query.focus = String(state.focus);
  if (state.selfWidths) query.widths = "self";
  return query;
}
