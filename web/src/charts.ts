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
