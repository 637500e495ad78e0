import { expect, test } from "vitest";
import { layoutInferenceBars, seriesPoints } from "./charts";

test("a bar per inference, phases stacked from the bottom on one scale", () => {
  const { segments, barWidth, highest } = layoutInferenceBars(
    [
      { dur: 100, phases: [60, 0, 40] },
      { dur: 50, phases: [10, 30, 10] },
    ],
    200,
    100,
  );
  expect(highest).toBe(100);
  expect(barWidth).toBe(100);
  // Inference 0: phase 0 at the bottom (60), phase 1 absent, phase 2 above it (40).
  expect(segments.filter((segment) => segment.inference === 0)).toEqual([
    { inference: 0, phase: 0, x: 0, y: 40, width: 100, height: 60 },
    { inference: 0, phase: 2, x: 0, y: 0, width: 100, height: 40 },
  ]);
  // Inference 1 is half as tall: its segments add up to 50 of 100 pixels.
  const second = segments.filter((segment) => segment.inference === 1);
  expect(second.reduce((sum, segment) => sum + segment.height, 0)).toBe(50);
  expect(second[0].x).toBe(100);
});

test("series over runs leave gaps where a run lacks a value", () => {
  const { highest, lines } = seriesPoints(
    [
      { name: "a", values: [1, 2, null, 4], color: "red" },
      { name: "b", values: [0, 0, 0, 0], color: "blue" },
    ],
    300,
    100,
  );
  expect(highest).toBe(4);
  expect(lines[0]).toEqual([
    [
      [0, 75],
      [100, 50],
    ],
    [[300, 0]],
  ]);
  expect(lines[1][0]).toHaveLength(4);
});
