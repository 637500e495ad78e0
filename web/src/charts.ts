// Latency charts on a canvas: a histogram of durations and their CDF (what the run
// overview shows per selected span name).

import { formatDuration } from "./format";

export interface HistogramBucket {
  start_ns: number;
  end_ns: number;
  count: number;
}

function prepare(canvas: HTMLCanvasElement, width: number, height: number): CanvasRenderingContext2D | null {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const context = canvas.getContext("2d");
  context?.setTransform(ratio, 0, 0, ratio, 0, 0);
  return context;
}

const MARGIN = { left: 48, right: 12, top: 12, bottom: 28 };

export function drawHistogram(canvas: HTMLCanvasElement, buckets: HistogramBucket[], width = 460, height = 220): void {
  const context = prepare(canvas, width, height);
  if (!context || buckets.length === 0) return;
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const highest = Math.max(...buckets.map((bucket) => bucket.count), 1);
  const barWidth = plotWidth / buckets.length;
  context.fillStyle = "#4678c8";
  buckets.forEach((bucket, i) => {
    const barHeight = (bucket.count / highest) * plotHeight;
    context.fillRect(MARGIN.left + i * barWidth, MARGIN.top + plotHeight - barHeight, Math.max(1, barWidth - 1), barHeight);
  });
  axes(context, width, height, plotWidth, plotHeight);
  context.fillStyle = "#333";
  context.font = "10px system-ui, sans-serif";
  context.fillText(formatDuration(buckets[0].start_ns), MARGIN.left, height - 10);
  const last = formatDuration(buckets[buckets.length - 1].end_ns);
  context.fillText(last, width - MARGIN.right - context.measureText(last).width, height - 10);
  context.fillText(String(highest), 4, MARGIN.top + 8);
  context.fillText("calls", 4, MARGIN.top + 20);
}

export function drawCdf(canvas: HTMLCanvasElement, points: { percent: number; duration_ns: number }[], width = 460, height = 220): void {
  const context = prepare(canvas, width, height);
  if (!context || points.length === 0) return;
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const low = points[0].duration_ns;
  const high = points[points.length - 1].duration_ns;
  const span = high - low || 1;
  context.strokeStyle = "#c84646";
  context.lineWidth = 2;
  context.beginPath();
  points.forEach((point, i) => {
    const x = MARGIN.left + ((point.duration_ns - low) / span) * plotWidth;
    const y = MARGIN.top + plotHeight - (point.percent / 100) * plotHeight;
    if (i === 0) context.moveTo(x, y);
    else context.lineTo(x, y);
  });
  context.stroke();
  axes(context, width, height, plotWidth, plotHeight);
  context.fillStyle = "#333";
  context.font = "10px system-ui, sans-serif";
  context.fillText(formatDuration(low), MARGIN.left, height - 10);
  const last = formatDuration(high);
  context.fillText(last, width - MARGIN.right - context.measureText(last).width, height - 10);
  context.fillText("100%", 4, MARGIN.top + 8);
  context.fillText("0%", 4, MARGIN.top + plotHeight);
}

function axes(context: CanvasRenderingContext2D, _width: number, _height: number, plotWidth: number, plotHeight: number): void {
  context.strokeStyle = "#888";
  context.lineWidth = 1;
  context.beginPath();
  context.moveTo(MARGIN.left, MARGIN.top);
  context.lineTo(MARGIN.left, MARGIN.top + plotHeight);
  context.lineTo(MARGIN.left + plotWidth, MARGIN.top + plotHeight);
  context.stroke();
}

// ---- Stacked bars per single inference (the latency details page) ----------------------

export interface BarSegment {
  inference: number; // index into the inferences
  phase: number; // index into the phases
  x: number;
  y: number;
  width: number;
  height: number;
}

// One bar per inference in time order, its height the inference's duration on a common
// scale, stacked from the bottom in the phases' order; pure, tested.
export function layoutInferenceBars(
  inferences: { dur: number; phases: number[] }[],
  plotWidth: number,
  plotHeight: number,
): { segments: BarSegment[]; barWidth: number; highest: number } {
  const highest = Math.max(1, ...inferences.map((inference) => inference.dur));
  const barWidth = inferences.length ? plotWidth / inferences.length : plotWidth;
  const segments: BarSegment[] = [];
  inferences.forEach((inference, index) => {
    let bottom = plotHeight;
    inference.phases.forEach((value, phase) => {
      if (value <= 0) return;
      const height = (value / highest) * plotHeight;
      segments.push({ inference: index, phase, x: index * barWidth, y: bottom - height, width: barWidth, height });
      bottom -= height;
    });
  });
  return { segments, barWidth, highest };
}

export function drawInferenceBars(
  canvas: HTMLCanvasElement,
  inferences: { dur: number; phases: number[] }[],
  colors: string[],
  width = 900,
  height = 240,
): { segments: BarSegment[]; barWidth: number; left: number; top: number; plotWidth: number } {
  const context = prepare(canvas, width, height);
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  // The bars share the whole plot's width, however few they are.
  const layout = { ...layoutInferenceBars(inferences, plotWidth, plotHeight), left: MARGIN.left, top: MARGIN.top, plotWidth };
  if (!context) return layout;
  const gap = layout.barWidth > 4 ? 1 : 0;
  for (const segment of layout.segments) {
    context.fillStyle = colors[segment.phase] ?? "#999";
    context.fillRect(MARGIN.left + segment.x, MARGIN.top + segment.y, Math.max(0.5, segment.width - gap), segment.height);
  }
  axes(context, width, height, plotWidth, plotHeight);
  context.fillStyle = "#333";
  context.font = "10px system-ui, sans-serif";
  context.fillText(formatDuration(layout.highest), 4, MARGIN.top + 8);
  context.fillText("inferences in time order →", MARGIN.left, height - 10);
  return layout;
}

// ---- A metric over time (the overview's metric charts) ---------------------------------

// points: [ts, first, min, max, last] as /counters gives them.
export function drawMetricChart(
  canvas: HTMLCanvasElement,
  points: [number, number, number, number, number][],
  range: { start: number; end: number; min: number; max: number },
  format: (value: number) => string,
  width = 440,
  height = 150,
): void {
  const context = prepare(canvas, width, height);
  if (!context) return;
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const span = Math.max(1, range.end - range.start);
  const low = Math.min(range.min, 0);
  const valueSpan = range.max - low || 1;
  const xOf = (ts: number) => MARGIN.left + ((ts - range.start) / span) * plotWidth;
  const yOf = (value: number) => MARGIN.top + plotHeight - ((value - low) / valueSpan) * plotHeight;
  context.fillStyle = "rgba(70, 120, 200, 0.25)";
  context.strokeStyle = "#4678c8";
  context.lineWidth = 1.5;
  for (const [ts, , minimum, maximum] of points) {
    const x = xOf(ts);
    context.fillRect(x, yOf(maximum), 1, Math.max(1, yOf(minimum) - yOf(maximum)));
  }
  context.beginPath();
  points.forEach(([ts, , , , last], i) => {
    if (i === 0) context.moveTo(xOf(ts), yOf(last));
    else context.lineTo(xOf(ts), yOf(last));
  });
  context.stroke();
  axes(context, width, height, plotWidth, plotHeight);
  context.fillStyle = "#333";
  context.font = "10px system-ui, sans-serif";
  context.fillText(format(range.max), 4, MARGIN.top + 8);
  context.fillText(format(low), 4, MARGIN.top + plotHeight);
  context.fillText("0", MARGIN.left, height - 10);
  const last = formatDuration(span);
  context.fillText(last, width - MARGIN.right - context.measureText(last).width, height - 10);
}

// ---- Series over runs (the explain page: graphs and breaks per model per run) -----------

export interface Series {
  name: string;
  values: (number | null)[]; // one per run, null where the run lacks it
  color: string;
}

// Points of each series on a plot, x by run index, y on a scale from 0 to the largest
// value; runs without a value leave a gap. Pure, tested.
export function seriesPoints(series: Series[], plotWidth: number, plotHeight: number): { highest: number; lines: [number, number][][][] } {
  const highest = Math.max(1, ...series.flatMap((item) => item.values.filter((value): value is number => value !== null)));
  const count = Math.max(1, ...series.map((item) => item.values.length));
  const xOf = (index: number) => (count === 1 ? plotWidth / 2 : (index / (count - 1)) * plotWidth);
  const lines = series.map((item) => {
    const pieces: [number, number][][] = [];
    let current: [number, number][] = [];
    item.values.forEach((value, index) => {
      if (value === null) {
        if (current.length) pieces.push(current);
        current = [];
        return;
      }
      current.push([xOf(index), plotHeight - (value / highest) * plotHeight]);
    });
    if (current.length) pieces.push(current);
    return pieces;
  });
  return { highest, lines };
}

export function drawSeriesChart(canvas: HTMLCanvasElement, series: Series[], labels: string[], width = 700, height = 220): void {
  const context = prepare(canvas, width, height);
  if (!context) return;
  const plotWidth = width - MARGIN.left - MARGIN.right - 10;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const { highest, lines } = seriesPoints(series, plotWidth, plotHeight);
  const left = MARGIN.left + 5;
  lines.forEach((pieces, index) => {
    context.strokeStyle = series[index].color;
    context.fillStyle = series[index].color;
    context.lineWidth = 2;
    for (const piece of pieces) {
      context.beginPath();
      piece.forEach(([x, y], i) => (i === 0 ? context.moveTo(left + x, MARGIN.top + y) : context.lineTo(left + x, MARGIN.top + y)));
      context.stroke();
      for (const [x, y] of piece) context.fillRect(left + x - 2.5, MARGIN.top + y - 2.5, 5, 5);
    }
  });
  axes(context, width, height, plotWidth + 10, plotHeight);
  context.fillStyle = "#333";
  context.font = "10px system-ui, sans-serif";
  context.fillText(String(highest), 4, MARGIN.top + 8);
  context.fillText("0", 4, MARGIN.top + plotHeight);
  if (labels.length) {
    context.fillText(labels[0], left, height - 10);
    const last = labels[labels.length - 1];
    if (labels.length > 1) context.fillText(last, width - MARGIN.right - context.measureText(last).width, height - 10);
  }
}
