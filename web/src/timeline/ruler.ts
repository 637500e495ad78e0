// The timeline's ruler: ticks at 1, 2 or 5 times a power of ten about every 120 pixels,
// labelled in one unit for the whole ruler (that of the largest time shown) with as many
// decimals as the step needs, so neighbouring labels always differ (at 10 ns per tick 12 s
// in: "12.00000001 s", "12.00000002 s"). Times are relative to the trace's start. Pure,
// apart from drawRuler.

export const TICK_SPACING_PIXELS = 120;

// 1, 2 or 5 times a power of ten, at or above `value`.
export function niceStep(value: number): number {
  const power = 10 ** Math.floor(Math.log10(Math.max(1, value)));
  for (const multiple of [1, 2, 5, 10]) if (multiple * power >= value) return multiple * power;
  return 10 * power;
}

const UNITS: [number, string][] = [
  [1e9, "s"],
  [1e6, "ms"],
  [1e3, "µs"],
  [1, "ns"],
];

// The unit for labels of times up to `largest` ns, and the decimals a step of `step` ns
// needs in it.
export function tickFormat(largest: number, step: number): { scale: number; unit: string; decimals: number } {
  const magnitude = Math.abs(largest);
  const [scale, unit] = UNITS.find(([size]) => magnitude >= size) ?? UNITS[UNITS.length - 1];
  const decimals = Math.max(0, Math.ceil(Math.log10(scale / Math.max(1, step)) - 1e-9));
  return { scale, unit, decimals };
}

export function formatTick(time: number, format: { scale: number; unit: string; decimals: number }): string {
  return `${(time / format.scale).toFixed(format.decimals)} ${format.unit}`;
}

export interface Tick {
  time: number;
  label: string;
}

// The ticks of the window [start, end] (ns) drawn `width` pixels wide.
export function rulerTicks(start: number, end: number, width: number): Tick[] {
  const nsPerPixel = (end - start) / Math.max(1, width);
  const step = niceStep(nsPerPixel * TICK_SPACING_PIXELS);
  const format = tickFormat(Math.max(Math.abs(start), Math.abs(end)), step);
  const ticks: Tick[] = [];
  for (let index = Math.ceil(start / step); index * step <= end; index += 1) {
    const time = index * step;
    ticks.push({ time, label: formatTick(time, format) });
  }
  return ticks;
}
