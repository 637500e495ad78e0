import { describe, expect, test } from "vitest";
import type { TimelineLayout } from "../api";
import { layoutRows, DEPTH_HEIGHT, PROCESS_HEADER, TRACK_GAP } from "./layout";
import { flowArrow, marksCover, marksWindow, trackDepthMiddle, trackTop } from "./overlays";

const layout: TimelineLayout = {
  label: "run",
  start_ns: 0,
  end_ns: 100,
  processes: [
    {
      pid: 1,
      name: "p",
      labels: [],
      tracks: [
        { id: 4, tid: 1, name: "main", kind: "thread", depth_count: 3, slice_count: 9 },
        { id: 7, tid: 2, name: "worker", kind: "thread", depth_count: 1, slice_count: 2 },
      ],
      counters: [],
    },
  ],
};

describe("overlay geometry", () => {
  const { rows } = layoutRows(layout);
  test("a slice's middle is its track's top plus its depth", () => {
    expect(trackTop(rows, 4)).toBe(PROCESS_HEADER);
    expect(trackDepthMiddle(rows, 4, 2)).toBe(PROCESS_HEADER + 2 * DEPTH_HEIGHT + DEPTH_HEIGHT / 2);
    const worker = PROCESS_HEADER + 3 * DEPTH_HEIGHT + TRACK_GAP;
    expect(trackDepthMiddle(rows, 7, 0)).toBe(worker + DEPTH_HEIGHT / 2);
    expect(trackDepthMiddle(rows, 7, 5)).toBe(worker + DEPTH_HEIGHT / 2); // clamped to its depths
    expect(trackDepthMiddle(rows, 99, 0)).toBeNull();
  });

  test("an arrow leaves and arrives horizontally and its head points at the end", () => {
    const arrow = flowArrow(10, 20, 110, 80);
    expect(arrow.control1[1]).toBe(20);
    expect(arrow.control2[1]).toBe(80);
    expect(arrow.head[0]).toEqual([110, 80]);
    // The head's base lies behind the tip (to the left for a left-to-right arrow).
    expect(arrow.head[1][0]).toBeLessThan(110);
    expect(arrow.head[2][0]).toBeLessThan(110);
    const backwards = flowArrow(200, 10, 100, 10);
    expect(backwards.head[1][0]).toBeGreaterThan(100 - 7);
  });

  test("marks are fetched for a wider window and fetched again when the view leaves it", () => {
    expect(marksWindow(100, 200)).toEqual([0, 300]);
    const fetched = marksWindow(100, 200);
    expect(marksCover(fetched, 150, 250, false)).toBe(true);
    expect(marksCover(fetched, 250, 350, false)).toBe(false);
    expect(marksCover(null, 0, 1, false)).toBe(false);
    expect(marksCover(fetched, 100, 101, false)).toBe(true);
    expect(marksCover(fetched, 100, 101, true)).toBe(false); // cut by the limit: look closer
  });
});
