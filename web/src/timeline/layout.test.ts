import { describe, expect, it, test } from "vitest";
import { colorOf, COUNTER_HEIGHT, DEPTH_HEIGHT, GROUP_HEADER, layoutRows, PROCESS_HEADER, TRACK_GAP } from "./layout";

test("a process header, then a row per depth of each track, then its counters", () => {
  const { rows, height } = layoutRows({
    label: "run",
    start_ns: 0,
    end_ns: 10,
    processes: [
      {
        pid: 7,
        name: "<b>serve</b>",
        labels: ["rank 0"],
        tracks: [{ id: 0, tid: 8, name: "main", kind: "thread", depth_count: 3, slice_count: 9 }],
        counters: [{ id: 0, name: "rss", unit: "bytes", sample_count: 2, min: 0, max: 1 }],
      },
    ],
  });
  expect(rows.map((row) => [row.kind, row.y, row.label])).toEqual([
    ["process", 0, "<b>serve</b> 7 [rank 0]"],
    ["track", PROCESS_HEADER, "main"],
    ["counter", PROCESS_HEADER + 3 * DEPTH_HEIGHT + TRACK_GAP, "rss"],
  ]);
  expect(height).toBe(PROCESS_HEADER + 3 * DEPTH_HEIGHT + TRACK_GAP + COUNTER_HEIGHT + TRACK_GAP);
});

test("a name always gets the same colour", () => {
  expect(colorOf("infer")).toBe(colorOf("infer"));
  expect(colorOf("infer")).toMatch(/^hsl\(\d+, 55%, 62%\)$/);
});

describe("the user's choices", () => {
  const timeline = {
    label: "run",
    start_ns: 0,
    end_ns: 10,
    processes: [
      {
        pid: 7,
        name: "serve",
        labels: [],
        tracks: [
          { id: 0, tid: 8, name: "MainThread", kind: "thread", depth_count: 3, slice_count: 9 },
          { id: 1, tid: 8, name: "task 1", kind: "lane", depth_count: 2, slice_count: 2 },
          { id: 2, tid: 8, name: "task 2", kind: "lane", depth_count: 1, slice_count: 2 },
          { id: 3, tid: 9, name: "ThreadPoolExecutor-0_0", kind: "thread", depth_count: 1, slice_count: 2 },
        ],
        counters: [],
      },
      { pid: 9, name: "other", labels: [], tracks: [{ id: 4, tid: 1, name: "main", kind: "thread", depth_count: 1, slice_count: 1 }], counters: [] },
    ],
  };
  const keys = (rows: { key: string }[]) => rows.map((row) => row.key);

  it("gathers a thread's task lanes under a header named after the thread", () => {
    const { rows } = layoutRows(timeline);
    expect(keys(rows)).toEqual(["p:7", "t:0", "g:7:lanes:8", "t:1", "t:2", "t:3", "p:9", "t:4"]);
    expect(rows[2].label).toBe("tasks on MainThread (2)");
    expect(rows[3].y).toBe(rows[2].y + GROUP_HEADER);
  });

  it("folds a process to its header, a group to its header, a track to its top depth", () => {
    const folded = layoutRows(timeline, { collapsed: new Set(["p:7"]) });
    expect(keys(folded.rows)).toEqual(["p:7", "p:9", "t:4"]);
    expect(folded.rows[1].y).toBe(PROCESS_HEADER);
    expect(keys(layoutRows(timeline, { collapsed: new Set(["g:7:lanes:8"]) }).rows)).toEqual(["p:7", "t:0", "g:7:lanes:8", "t:3", "p:9", "t:4"]);
    const track = layoutRows(timeline, { collapsed: new Set(["t:0"]) }).rows[1];
    expect(track.height).toBe(DEPTH_HEIGHT);
    expect(track.kind === "track" && track.depths).toBe(1);
  });

  it("puts pinned tracks first, in a section of their own, and nowhere else", () => {
    const { rows, pinnedHeight, height } = layoutRows(timeline, { pinned: new Set(["t:3"]), collapsed: new Set(["p:7"]) });
    expect(keys(rows)).toEqual(["t:3", "p:7", "p:9", "t:4"]);
    expect(rows[0].pinned).toBe(true);
    expect(rows[0].y).toBe(0);
    expect(pinnedHeight).toBe(DEPTH_HEIGHT + TRACK_GAP);
    expect(rows[1].y).toBe(pinnedHeight);
    expect(height).toBe(pinnedHeight + 2 * PROCESS_HEADER + DEPTH_HEIGHT + TRACK_GAP);
  });

  it("keeps the tracks whose name or whose process's name holds the filter", () => {
    expect(keys(layoutRows(timeline, { filter: "executor" }).rows)).toEqual(["p:7", "t:3"]);
    expect(keys(layoutRows(timeline, { filter: "task 2" }).rows)).toEqual(["p:7", "g:7:lanes:8", "t:2"]);
    expect(keys(layoutRows(timeline, { filter: "OTHER" }).rows)).toEqual(["p:9", "t:4"]);
    expect(layoutRows(timeline, { filter: "nothing" }).rows).toEqual([]);
  });
});
