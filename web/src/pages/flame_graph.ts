// A flame graph (roots at the bottom) or an icicle (roots on top) of a merged tree given as
// nodes in depth-first order with parent indices. Widths are the nodes' values (inclusive time, or self time:
// then a node's width is its self time plus its children's widths, so the picture stays
// nested); a click zooms into a node. Colours come from the name, or from the node's own
// colour (the differential flame graph of the compare page: slower red, faster blue).

import { elide, TextMeasure } from "../timeline/elide";
import { colorOf } from "../timeline/layout";

export interface FlameNode {
  name: string;
  parent: number | null;
  value: number;
  self: number;
  color?: string;
  label: string;
}

export interface FlameOptions {
  focus: number | null;
  width: number;
  selfMode?: boolean;
  flame?: boolean; // roots at the bottom (a flame graph); else on top (an icicle)
  onClick: (index: number | null) => void;
  onHover: (index: number | null) => void;
}

const ROW = 18;

interface Frame {
  index: number;
  x: number;
  width: number;
  depth: number;
}

// The frames' positions: pure, tested.
export function layoutFlame(nodes: FlameNode[], focus: number | null, width: number, selfMode = false): Frame[] {
  const children: number[][] = nodes.map(() => []);
  const roots: number[] = [];
  nodes.forEach((node, index) => (node.parent === null ? roots.push(index) : children[node.parent].push(index)));
  const weight: number[] = nodes.map(() => 0);
  for (let index = nodes.length - 1; index >= 0; index -= 1) {
    const own = selfMode ? nodes[index].self : nodes[index].value;
    const sum = children[index].reduce((total, child) => total + weight[child], 0);
    weight[index] = selfMode ? own + sum : Math.max(own, sum);
  }
  const frames: Frame[] = [];
  const place = (index: number, x: number, scale: number, depth: number) => {
    const frameWidth = weight[index] * scale;
    frames.push({ index, x, width: frameWidth, depth });
    let childX = x;
    for (const child of children[index]) {
      place(child, childX, scale, depth + 1);
      childX += weight[child] * scale;
    }
  };
  if (focus !== null && nodes[focus]) {
    // The focused node's ancestors as full-width bars above it.
    const chain: number[] = [];
    for (let parent = nodes[focus].parent; parent !== null; parent = nodes[parent].parent) chain.unshift(parent);
    chain.forEach((ancestor, depth) => frames.push({ index: ancestor, x: 0, width, depth }));
    place(focus, 0, width / Math.max(1, weight[focus]), chain.length);
    return frames;
  }
  const total = roots.reduce((sum, root) => sum + weight[root], 0);
  let x = 0;
  for (const root of roots) {
    place(root, x, width / Math.max(1, total), 0);
    x += (weight[root] * width) / Math.max(1, total);
  }
  return frames;
}

export function drawFlameGraph(canvas: HTMLCanvasElement, nodes: FlameNode[], options: FlameOptions): void {
  const frames = layoutFlame(nodes, options.focus, options.width, options.selfMode);
  const depth = frames.reduce((deepest, frame) => Math.max(deepest, frame.depth), 0) + 1;
  const ratio = window.devicePixelRatio || 1;
  const height = depth * ROW + 2;
  const top = (frameDepth: number) => (options.flame ? (depth - 1 - frameDepth) * ROW : frameDepth * ROW);
  canvas.width = options.width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${options.width}px`;
  canvas.style.height = `${height}px`;
  const context = canvas.getContext("2d");
  if (!context) return;
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.font = "11px system-ui, sans-serif";
  context.textBaseline = "middle";
  const measure = new TextMeasure(context).measure;
  for (const frame of frames) {
    if (frame.width < 0.5) continue;
    const node = nodes[frame.index];
    context.fillStyle = node.color ?? colorOf(node.name);
    context.fillRect(frame.x, top(frame.depth), Math.max(0.5, frame.width - 1), ROW - 1);
    if (frame.width > 30) {
      context.fillStyle = "#111";
      context.fillText(elide(node.name, frame.width - 6, measure), frame.x + 3, top(frame.depth) + ROW / 2);
    }
  }
  canvas.dataset.focus = options.focus === null ? "" : String(options.focus);
  canvas.dataset.frames = String(frames.filter((frame) => frame.width >= 0.5).length);
  const frameAt = (event: MouseEvent) => {
    const fromTop = Math.floor(event.offsetY / ROW);
    const row = options.flame ? depth - 1 - fromTop : fromTop;
    const hit = frames.find((frame) => frame.depth === row && event.offsetX >= frame.x && event.offsetX < frame.x + frame.width);
    return hit ? hit.index : null;
  };
  canvas.onclick = (event) => {
    const index = frameAt(event);
    options.onClick(index === options.focus ? (index !== null ? nodes[index].parent : null) : index);
  };
  canvas.onmousemove = (event) => options.onHover(frameAt(event));
}

// One root of `opsight report --tree`'s JSON (a single call with its nested calls).
export interface CallNode {
  name: string;
  start_ns: number;
  dur_ns: number;
  self_ns: number;
  track?: string;
  children: CallNode[];
  descendants_omitted?: number;
}

// A single root's calls as flame nodes (depth first, children in time order), for the
// icicle of one root (HiQ's call graph): widths are the calls' own durations.
export function nodesOfCall(root: CallNode, describe: (node: CallNode) => string): FlameNode[] {
  const nodes: FlameNode[] = [];
  const visit = (node: CallNode, parent: number | null) => {
    const index = nodes.length;
    nodes.push({ name: node.name, parent, value: node.dur_ns, self: node.self_ns, label: describe(node) });
    const children = [...(node.children ?? [])].sort((a, b) => a.start_ns - b.start_ns);
    for (const child of children) visit(child, index);
  };
  visit(root, null);
  return nodes;
}
