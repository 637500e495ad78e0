import { expect, test } from "vitest";
import { MIN_SPAN_NS, tileLevel, tileRange, tilesFor, Viewport } from "./viewport";

test("zooming keeps the time under the mouse", () => {
  const view = new Viewport(0, 1000, 100, 0, 1000);
  const before = view.timeAt(25);
  view.zoomAt(0.5, 25);
  expect(view.span).toBe(500);
  expect(view.timeAt(25)).toBeCloseTo(before);
  view.zoomAt(1e-9, 50);
  expect(view.span).toBe(MIN_SPAN_NS);
});

test("panning moves by pixels and stays near the trace", () => {
  const view = new Viewport(0, 1000, 100, 0, 1000);
  view.panBy(10);
  expect([view.start, view.end]).toEqual([100, 1100]);
  view.panBy(1e9);
  expect(view.end).toBe(2000); // at most one trace span beyond the end
  view.zoomAt(1e9, 0);
  expect(view.span).toBe(3000);
});

test("show frames a range with a margin", () => {
  const view = new Viewport(0, 1000, 100, 0, 1000);
  view.show(200, 400);
  expect(view.start).toBeCloseTo(190);
  expect(view.end).toBeCloseTo(410);
});

test("tiles cover the window at a power-of-two resolution", () => {
  expect(tileLevel(1)).toBe(0);
  expect(tileLevel(1000)).toBe(9);
  expect(tileRange(9, 2)).toEqual([2 * 1024 * 512, 3 * 1024 * 512]);
  const keys = tilesFor(0, 1_000_000, 1000);
  expect(keys.map((key) => key.index)).toEqual([0, 1]);
  expect(keys.every((key) => key.level === 9)).toBe(true);
});
