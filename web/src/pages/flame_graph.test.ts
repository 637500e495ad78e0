import { expect, test } from "vitest";
import { layoutFlame, type FlameNode } from "./flame_graph";

const node = (name: string, parent: number | null, value: number, self: number): FlameNode => ({ name, parent, value, self, label: name });

// main(100) -> a(60) -> c(20); main -> b(30); a second root r(100).
const nodes = [node("main", null, 100, 10), node("a", 0, 60, 40), node("c", 1, 20, 20), node("b", 0, 30, 30), node("r", null, 100, 100)];

test("inclusive widths nest children inside their parent, roots side by side", () => {
  const frames = layoutFlame(nodes, null, 200);
  const at = (index: number) => frames.find((frame) => frame.index === index)!;
  expect(at(0)).toEqual({ index: 0, x: 0, width: 100, depth: 0 });
  expect(at(1)).toEqual({ index: 1, x: 0, width: 60, depth: 1 });
  expect(at(2)).toEqual({ index: 2, x: 0, width: 20, depth: 2 });
  expect(at(3)).toEqual({ index: 3, x: 60, width: 30, depth: 1 });
  expect(at(4)).toEqual({ index: 4, x: 100, width: 100, depth: 0 });
});

test("zooming into a node gives it the whole width under its ancestors", () => {
  const frames = layoutFlame(nodes, 1, 300);
  expect(frames[0]).toEqual({ index: 0, x: 0, width: 300, depth: 0 });
  expect(frames.find((frame) => frame.index === 1)).toEqual({ index: 1, x: 0, width: 300, depth: 1 });
  expect(frames.find((frame) => frame.index === 2)).toEqual({ index: 2, x: 0, width: 100, depth: 2 });
  expect(frames.some((frame) => frame.index === 3 || frame.index === 4)).toBe(false);
});

test("self widths: a node is its self time plus its children", () => {
  const frames = layoutFlame(nodes, null, 200, true);
  expect(frames.find((frame) => frame.index === 0)!.width).toBe(100); // 10 + (40 + 20) + 30
});

test("one root's calls become flame nodes in time order with their durations", async () => {
  const { nodesOfCall } = await import("./flame_graph");
  const root = {
    name: "request", start_ns: 0, dur_ns: 100, self_ns: 10,
    children: [
      { name: "late", start_ns: 60, dur_ns: 30, self_ns: 30, children: [] },
      { name: "early", start_ns: 5, dur_ns: 50, self_ns: 20, children: [{ name: "leaf", start_ns: 6, dur_ns: 30, self_ns: 30, children: [] }] },
    ],
  };
  const flattened = nodesOfCall(root, (node) => node.name);
  expect(flattened.map((item) => [item.name, item.parent, item.value])).toEqual([
    ["request", null, 100],
    ["early", 0, 50],
    ["leaf", 1, 30],
    ["late", 0, 30],
  ]);
  const frames = layoutFlame(flattened, null, 100);
  expect(frames.find((frame) => frame.index === 3)).toEqual({ index: 3, x: 50, width: 30, depth: 1 });
});
