import { expect, test } from "vitest";
import { colorOf, COUNTER_HEIGHT, DEPTH_HEIGHT, layoutRows, PROCESS_HEADER, TRACK_GAP } from "./layout";

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
