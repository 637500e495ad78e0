import { describe, expect, test } from "vitest";
import { displayOrder, isCollapsed, queryOfState, stateFromQuery, toggledForAll, visibleRows, type TreeRow } from "./tree_state";

// main (100) → load (10), infer (80) → infer.attn (50), infer.mlp (25); idle (300)
const rows: TreeRow[] = [
  { name: "main", parent: null, depth: 0, total_ns: 100 },
  { name: "load", parent: 0, depth: 1, total_ns: 10 },
  { name: "infer", parent: 0, depth: 1, total_ns: 80 },
  { name: "infer.attn", parent: 2, depth: 2, total_ns: 50 },
  { name: "infer.mlp", parent: 2, depth: 2, total_ns: 25 },
  { name: "idle", parent: null, depth: 0, total_ns: 300 },
];

describe("the call tree's rows", () => {
  test("children by total time, depth first; or as they ran", () => {
    expect(displayOrder(rows, "total")).toEqual([5, 0, 2, 3, 4, 1]);
    expect(displayOrder(rows, "run")).toEqual([0, 1, 2, 3, 4, 5]);
  });

  test("a few levels open at first; a toggle flips one row", () => {
    const state = { depth: 2, toggled: new Set<number>(), filter: "" };
    expect([...visibleRows(rows, state)].sort()).toEqual([0, 1, 2, 5]);
    expect(isCollapsed(rows, 2, state)).toBe(true);
    state.toggled.add(2);
    expect([...visibleRows(rows, state)].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    state.toggled = new Set([0]);
    expect([...visibleRows(rows, state)].sort()).toEqual([0, 5]);
  });

  test("a filter keeps the matches and their callers, in any case", () => {
    const state = { depth: 1, toggled: new Set<number>(), filter: "MLP" };
    expect([...visibleRows(rows, state)].sort()).toEqual([0, 2, 4]);
  });

  test("expand all and collapse all", () => {
    const open = { depth: 2, toggled: toggledForAll(rows, 2, true), filter: "" };
    expect(visibleRows(rows, open).size).toBe(rows.length);
    const shut = { depth: 2, toggled: toggledForAll(rows, 2, false), filter: "" };
    expect([...visibleRows(rows, shut)].sort()).toEqual([0, 5]);
  });

  test("the URL brings the state back exactly, and a default state adds nothing", () => {
    const state = stateFromQuery({}, rows.length);
    expect(queryOfState(state)).toEqual({});
    state.order = "run";
    state.depth = 4;
    state.toggled = new Set([4, 1]);
    state.filter = "infer";
    state.focus = 3;
    state.selfWidths = true;
    const query = queryOfState(state, { root: "2" });
    expect(query).toEqual({ root: "2", order: "run", depth: "4", x: "1,4", filter: "infer", focus: "3", widths: "self" });
    expect(stateFromQuery(query, rows.length)).toEqual(state);
  });

  test("bad parameters fall back to the defaults", () => {
    const state = stateFromQuery({ depth: "-1", focus: "99", x: "a,2,77" }, rows.length);
    expect(state.depth).toBe(3);
    expect(state.focus).toBeNull();
    expect([...state.toggled]).toEqual([2]);
  });
});
