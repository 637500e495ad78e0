// Counter tracks as numbers a reader can use: the unit (the track's own, else read from
// the name's suffix as opsight's samplers name them: process.rss_bytes, *_bytes_per_s,
// *_percent, *_watts, *_celsius), values formatted in it, and the value at any time held
// from the sample at or before it (a counter is a step function: nothing happens between
// samples, so it is drawn as steps, never as a line through data that is not there).
// Pure.

// A counter tile's point: [ts, first, min, max, last] of the samples in one pixel's time
// (one sample when zoomed in enough: then all four values are that sample's).
export type CounterPoint = [number, number, number, number, number];

export function counterUnit(name: string, unit: string): string {
  if (unit) return unit;
  if (/_bytes_per_s(ec)?$/.test(name)) return "bytes/s";
  if (/_bytes$/.test(name)) return "bytes";
  if (/_percent$/.test(name)) return "%";
  if (/_watts$/.test(name)) return "W";
  if (/_celsius$/.test(name)) return "°C";
  return "";
}

function bytes(value: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let scaled = Math.abs(value);
  let index = 0;
  while (scaled >= 1024 && index < units.length - 1) {
    scaled /= 1024;
    index += 1;
  }
  const sign = value < 0 ? "-" : "";
  return index === 0 ? `${sign}${Math.round(scaled)} B` : `${sign}${scaled.toFixed(scaled >= 100 ? 0 : scaled >= 10 ? 1 : 2)} ${units[index]}`;
}

function plain(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  return Number(value.toPrecision(4)).toString();
}

export function formatCounterValue(value: number, unit: string): string {
  if (!Number.isFinite(value)) return String(value);
  if (unit === "bytes" || unit === "B") return bytes(value);
  if (unit === "bytes/s" || unit === "B/s") return `${bytes(value)}/s`;
  if (unit === "%") return `${value.toFixed(1)}%`;
  return unit ? `${plain(value)} ${unit}` : plain(value);
}

// The index of the last point at or before `time`, or -1 (points are in time order).
export function pointIndexAt(points: CounterPoint[], time: number): number {
  let low = 0;
  let high = points.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (points[middle][0] <= time) low = middle + 1;
    else high = middle;
  }
  return low - 1;
}

// The counter's value at `time`: the last sample at or before it (null before the first).
export function counterValueAt(points: CounterPoint[], time: number): number | null {
  const index = pointIndexAt(points, time);
  return index < 0 ? null : points[index][4];
}

// The outline of a counter drawn as steps, as [x, y] vertices: each point's value is held
// flat until the next point, where the line goes straight up or down; a pixel holding many
// samples draws its whole min..max span. xOf and yOf map time and value to pixels.
export function stepOutline(points: CounterPoint[], xOf: (time: number) => number, yOf: (value: number) => number, rightEdge: number): [number, number][] {
  const vertices: [number, number][] = [];
  for (let i = 0; i < points.length; i += 1) {
    const [ts, first, minimum, maximum, last] = points[i];
    const x = xOf(ts);
    if (i > 0) vertices.push([x, vertices[vertices.length - 1][1]]); // held until here
    vertices.push([x, yOf(first)]);
    if (minimum !== maximum) {
      vertices.push([x, yOf(maximum)]);
      vertices.push([x, yOf(minimum)]);
    }
    vertices.push([x, yOf(last)]);
  }
  if (vertices.length) vertices.push([rightEdge, vertices[vertices.length - 1][1]]);
  return vertices;
}
