import { describe, expect, it } from "vitest";
import type { TimelineLayout } from "../api";
import { extentOfTile, MAX_PACKED_LANES, packableLanes, packLanes, wholeTraceLevel } from "./lanes";
import { layoutRows } from "./layout";
import { TILE_PIXELS } from "./viewport";

describe("packing task lanes", () => {
  it("puts tasks that do not overlap in time in one row", () => {
    const rows = packLanes([
      { id: 1, extent: [0, 10] },
      { id: 2, extent: [5, 20] },
      { id: 3, extent: [12, 30] },
      { id: 4, extent: [21, 25] },
      { id: 5, extent: [31, 40] },
    ]);
    expect(rows).toEqual([
      [1, 3, 5],
      [2, 4],
    ]);
  });

  it("needs as many rows as tasks alive at once, no more", () => {
    const many = Array.from({ length: 100 }, (_, i) => ({ id: i, extent: [i * 10, i * 10 + 25] as [number, number] }));
    expect(packLanes(many).length).toBe(3);
  });

  it("reads a track's extent from its roots and picks a tile level covering the trace", () => {
    const tile = { track: 1, start: 0, end: 0, resolution: 1, names: ["a"], depths: [[[100, 50, 1, 0, 0], [300, 20, 1, 1, 0]], [[110, 5, 1, 2, 0]]] as [number, number, number, number, number][][] };
    expect(extentOfTile(tile)).toEqual([100, 320]);
    expect(extentOfTile({ ...tile, depths: [] })).toBeNull();
    const span = 123_456_789;
    expect(TILE_PIXELS * 2 ** wholeTraceLevel(span)).toBeGreaterThanOrEqual(span);
    expect(TILE_PIXELS * 2 ** (wholeTraceLevel(span) - 1)).toBeLessThan(span);
  });

  const lane = (id: number, tid = 5) => ({ id, tid, name: `asyncio Task-${id} (handle)`, kind: "lane", depth_count: 2, slice_count: 2 });
  const timeline = (lanes: number): TimelineLayout => ({
    label: "run",
    start_ns: 0,
    end_ns: 1000,
    processes: [{ pid: 1, name: "py", labels: [], tracks: [{ id: 0, tid: 5, name: "MainThread", kind: "thread", depth_count: 1, slice_count: 1 }, ...Array.from({ length: lanes }, (_, i) => lane(i + 1))], counters: [] }],
  });

  it("packs a thread's lanes in the layout, not more than a run's worth", () => {
    expect(packableLanes(timeline(3))).toEqual([1, 2, 3]);
    expect(packableLanes(timeline(1))).toEqual([]); // one lane: nothing to pack
    expect(packableLanes(timeline(MAX_PACKED_LANES + 1))).toEqual([]);
    const extents = new Map<number, [number, number]>([
      [1, [0, 10]],
      [2, [5, 20]],
      [3, [12, 30]],
    ]);
    const { rows } = layoutRows(timeline(3), { extents });
    expect(rows.map((row) => row.key)).toEqual(["p:1", "t:0", "g:1:lanes:5", "k:1:lanes:5:0", "k:1:lanes:5:1"]);
    const first = rows[3];
    expect(first.kind === "packed" && first.tracks.map((track) => track.id)).toEqual([1, 3]);
    expect(first.label).toBe("2 tasks: Task-1 (handle), Task-3 (handle)");
  });
});
