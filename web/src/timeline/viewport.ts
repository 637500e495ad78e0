// The visible time window of the timeline and the arithmetic of zooming and panning it:
// which nanosecond a pixel shows, zooming around a pixel (the mouse, or the middle for
// W/S), panning by pixels (drag, A/D). The window never gets narrower than MIN_SPAN_NS
// and never wanders more than a screen beyond the trace.

export const MIN_SPAN_NS = 50;

// The window that shows [start, end] with a margin of 5% on each side (at least
// MIN_SPAN_NS wide): what a slice found, or a trace opened from the Traces page, is shown in.
export function windowWithMargin(start: number, end: number): [number, number] {
  const margin = Math.max(MIN_SPAN_NS, end - start) * 0.05;
  return [start - margin, Math.max(end, start + MIN_SPAN_NS) + margin];
}

export class Viewport {
  constructor(
    public start: number,
    public end: number,
    public width: number, // pixels of the time axis
    private readonly traceStart: number,
    private readonly traceEnd: number,
  ) {
    this.clamp();
  }

  get span(): number {
    return this.end - this.start;
  }

  nsPerPixel(): number {
    return this.span / Math.max(1, this.width);
  }

  timeAt(x: number): number {
    return this.start + x * this.nsPerPixel();
  }

  pixelAt(time: number): number {
    return (time - this.start) / this.nsPerPixel();
  }

  // factor < 1 zooms in (the window shrinks), > 1 out; `x` stays over the same time.
  zoomAt(factor: number, x: number): void {
    const anchor = this.timeAt(x);
    const span = Math.max(MIN_SPAN_NS, this.span * factor);
    const fraction = x / Math.max(1, this.width);
    this.start = anchor - span * fraction;
    this.end = this.start + span;
    this.clamp();
  }

  // Moves the window by `pixels` (positive: later in time).
  panBy(pixels: number): void {
    const delta = pixels * this.nsPerPixel();
    this.start += delta;
    this.end += delta;
    this.clamp();
  }

  // Shows [start, end] with a margin of 5% on each side.
  show(start: number, end: number): void {
    [this.start, this.end] = windowWithMargin(start, end);
    this.clamp();
  }

  private clamp(): void {
    const traceSpan = Math.max(MIN_SPAN_NS, this.traceEnd - this.traceStart);
    let span = Math.min(Math.max(MIN_SPAN_NS, this.span), traceSpan * 3);
    if (!Number.isFinite(span)) span = traceSpan;
    const lowest = this.traceStart - traceSpan;
    const highest = this.traceEnd + traceSpan;
    if (this.start < lowest) this.start = lowest;
    if (this.start + span > highest) this.start = highest - span;
    this.end = this.start + span;
  }
}

// The tiles a view needs: the resolution is the power of two at or below the view's ns per
// pixel (so tiles are at least as sharp as the screen), and time is cut in tiles of
// TILE_PIXELS pixels at that resolution.
export const TILE_PIXELS = 1024;

export interface TileKey {
  level: number; // resolution = 2^level ns per pixel
  index: number; // covers [index, index + 1) * TILE_PIXELS * 2^level ns
}

export function tileLevel(nsPerPixel: number): number {
  return Math.max(0, Math.floor(Math.log2(Math.max(1, nsPerPixel))));
}

export function tileRange(level: number, index: number): [number, number] {
  const width = TILE_PIXELS * 2 ** level;
  return [index * width, (index + 1) * width];
}

export function tilesFor(start: number, end: number, nsPerPixel: number): TileKey[] {
  const level = tileLevel(nsPerPixel);
  const width = TILE_PIXELS * 2 ** level;
  const keys: TileKey[] = [];
  for (let index = Math.floor(start / width); index * width <= end; index += 1) keys.push({ level, index });
  return keys;
}
