// The timeline's canvas and its state: the time window (viewport.ts), the vertical scroll,
// the tracks' layout under the user's choices (layout.ts: collapsed, pinned, filtered), the
// tiles held (tile_cache.ts), the selection, search highlights, the marked range and the
// tracks of its area (the rows a shift+drag crossed), the critical path's rows, the flows and instants of the window, the mouse's hover. It
// schedules frames; drawing.ts draws them and input.ts turns the mouse and keyboard into
// calls of the methods here. The ruler is drawn at the canvas's top and the tracks scroll
// under it inside the canvas, so it never leaves the screen.
// Frame costs go to performance measures ("opsight-frame"), the first complete drawing to
// the mark "opsight-first-draw": what the scale benchmark reads.

import type { MarksAnswer, TileAnswer, TimelineLayout } from "../api";
import type { CounterPoint } from "./counters";
import { drawFrame, type InstantHit, type SliceHit } from "./drawing";
import { TimelineInput } from "./input";
import { extentOfTile, wholeTraceLevel, type Extent } from "./lanes";
import { LABEL_WIDTH, layoutRows, RULER_HEIGHT, tracksOfRow, type Layout, type Row } from "./layout";
import { TileCache } from "./tile_cache";
import { Viewport } from "./viewport";

export type { InstantHit } from "./drawing";

export { LABEL_WIDTH, RULER_HEIGHT } from "./layout";
export const BOTTOM_MARGIN = 8;

export interface CounterTile {
  points: CounterPoint[];
}

export interface TimelineSources {
  tiles: (track: number, start: number, end: number, resolution: number) => Promise<TileAnswer>;
  counters: (track: number, start: number, end: number, resolution: number) => Promise<CounterTile>;
  marks?: (start: number, end: number) => Promise<MarksAnswer>;
}

export interface TimelineEvents {
  onSelect: (row: number) => void;
  onRange: (start: number, end: number, tracks: number[] | null) => void; // absolute ns, start <= end; tracks: the area's (null: every track)
  onWindowChange: (start: number, end: number) => void;
  onInstant?: (instant: InstantHit) => void;
  onTracksChange?: (choices: { collapsed: string[]; pinned: string[] }) => void;
  onScroll?: (scroll: number) => void;
}

export interface TrackChoices {
  collapsed: string[];
  pinned: string[];
  filter: string;
  laneTiles: Map<number, TileAnswer>; // whole-trace tiles of task lanes, to pack them (lanes.ts)
}

export class TimelineView {
  readonly canvas: HTMLCanvasElement;
  readonly viewport: Viewport;
  readonly origin: number; // tiles are cut in time relative to the trace's start
  readonly slices: TileCache<TileAnswer>;
  readonly counters: TileCache<CounterTile>;
  layout: Layout;
  scroll = 0; // pixels of the scrolled section moved up
  height = 0; // of the canvas, CSS pixels
  readonly collapsed = new Set<string>();
  readonly pinned = new Set<string>();
  filter = "";
  readonly laneExtents = new Map<number, Extent>();
  selectedRow: number | null = null;
  highlightRows = new Set<number>();
  range: [number, number] | null = null; // relative to the origin
  areaTracks: Set<number> | null = null; // the range's tracks (null: every track)
  criticalRows: Set<number> | null = null;
  hover: { x: number; y: number } | null = null;
  marks: MarksAnswer | null = null;
  marksFetched: [number, number] | null = null; // relative to the origin
  marksPending = false;
  showFlows = true;
  showInstants = true;
  // What the last frame drew, for clicks and for the tests.
  sliceHits: SliceHit[] = [];
  instantHits: InstantHit[] = [];
  readonly drawn = { flows: 0, instants: 0, critical: 0 };
  readonly frameTimes: number[] = [];
  private frameRequested = false;
  private firstDrawDone = false;
  private availableHeight: number;
  private readonly input: TimelineInput;

  constructor(
    readonly timeline: TimelineLayout,
    readonly sources: TimelineSources,
    readonly events: TimelineEvents,
    width: number,
    height: number,
    window?: [number, number],
    choices?: Partial<TrackChoices>,
  ) {
    this.origin = timeline.start_ns;
    this.availableHeight = height;
    for (const key of choices?.collapsed ?? []) this.collapsed.add(key);
    for (const key of choices?.pinned ?? []) this.pinned.add(key);
    this.filter = choices?.filter ?? "";
    const laneLevel = wholeTraceLevel(timeline.end_ns - timeline.start_ns);
    for (const [track, tile] of choices?.laneTiles ?? []) {
      const extent = extentOfTile(tile);
      if (extent) this.laneExtents.set(track, extent);
    }
    this.layout = this.computeLayout();
    const traceStart = 0;
    const traceEnd = Math.max(1, timeline.end_ns - timeline.start_ns);
    const [start, end] = window ? [window[0] - this.origin, window[1] - this.origin] : [traceStart, traceEnd];
    this.viewport = new Viewport(start, end, Math.max(100, width - LABEL_WIDTH), traceStart, traceEnd);
    const redraw = () => this.requestFrame();
    this.slices = new TileCache<TileAnswer>(
      (track, _key, start0, end0, resolution) => sources.tiles(track, start0 + this.origin, end0 + this.origin, resolution),
      redraw,
    );
    this.counters = new TileCache<CounterTile>(
      (track, _key, start0, end0, resolution) =>
        sources.counters(track, start0 + this.origin, end0 + this.origin, resolution),
      redraw,
    );
    for (const [track, tile] of choices?.laneTiles ?? []) this.slices.put(track, { level: laneLevel, index: 0 }, tile);
    this.canvas = document.createElement("canvas");
    this.canvas.className = "timeline-canvas";
    this.canvas.tabIndex = 0;
    this.resize(width, height);
    this.input = new TimelineInput(this);
  }

  // ---- size and vertical scroll ------------------------------------------------------

  // The canvas is `width` wide and at most `availableHeight` tall (less when the tracks
  // need less).
  resize(width: number, availableHeight = this.availableHeight): void {
    this.availableHeight = availableHeight;
    const ratio = window.devicePixelRatio || 1;
    const needed = RULER_HEIGHT + this.layout.height + BOTTOM_MARGIN;
    const height = Math.max(RULER_HEIGHT + 60, Math.min(needed, availableHeight || needed));
    this.height = height;
    // (Setting a canvas's size clears it: only when it changes.)
    if (this.canvas.width !== Math.floor(width * ratio)) this.canvas.width = Math.floor(width * ratio);
    if (this.canvas.height !== Math.floor(height * ratio)) this.canvas.height = Math.floor(height * ratio);
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${height}px`;
    this.viewport.width = Math.max(100, width - LABEL_WIDTH);
    this.scrollTo(this.scroll, false);
    this.requestFrame();
  }

  maxScroll(): number {
    return Math.max(0, RULER_HEIGHT + this.layout.height + BOTTOM_MARGIN - this.height);
  }

  scrollTo(scroll: number, notify = true): void {
    const clamped = Math.round(Math.min(this.maxScroll(), Math.max(0, scroll)));
    if (clamped === this.scroll) return;
    this.scroll = clamped;
    this.requestFrame();
    if (notify) this.events.onScroll?.(clamped);
  }

  // Where a y of layout.ts's coordinate is on the canvas (pinned rows do not scroll).
  screenY(layoutY: number): number {
    return layoutY < this.layout.pinnedHeight ? RULER_HEIGHT + layoutY : RULER_HEIGHT + layoutY - this.scroll;
  }

  // The row under a canvas y, or null.
  rowAt(y: number): Row | null {
    if (y < RULER_HEIGHT) return null;
    const inPinned = y < RULER_HEIGHT + this.layout.pinnedHeight;
    for (const row of this.layout.rows) {
      if (row.pinned !== inPinned) continue;
      const top = this.screenY(row.y);
      if (y >= top && y < top + row.height) return row;
    }
    return null;
  }

  // The slice tracks of the rows that a vertical span of the canvas crosses (a drag's), in
  // the layout's order (layout.ts, tracksOfRow); null (every track) when the span starts on
  // the ruler.
  tracksBetween(y0: number, y1: number): number[] | null {
    if (Math.min(y0, y1) < RULER_HEIGHT) return null;
    const low = Math.min(y0, y1);
    const high = Math.max(y0, y1);
    const pinnedBottom = RULER_HEIGHT + this.layout.pinnedHeight;
    const tracks: number[] = [];
    for (const row of this.layout.rows) {
      let top = this.screenY(row.y);
      let bottom = top + row.height;
      if (!row.pinned) top = Math.max(top, pinnedBottom); // under the pinned section: hidden
      bottom = Math.min(bottom, this.height);
      if (top >= bottom || bottom <= low || top > high) continue;
      for (const track of tracksOfRow(this.timeline, row)) if (!tracks.includes(track)) tracks.push(track);
    }
    return tracks;
  }

  // ---- tracks: collapse, pin, filter --------------------------------------------------

  private computeLayout(): Layout {
    return layoutRows(this.timeline, { collapsed: this.collapsed, pinned: this.pinned, filter: this.filter, extents: this.laneExtents });
  }

  private relayout(notify: boolean): void {
    this.layout = this.computeLayout();
    this.resize(this.viewport.width + LABEL_WIDTH, this.availableHeight);
    if (notify) this.events.onTracksChange?.({ collapsed: [...this.collapsed], pinned: [...this.pinned] });
  }

  setAvailableHeight(height: number): void {
    this.resize(this.viewport.width + LABEL_WIDTH, height);
  }

  toggleCollapsed(key: string): void {
    if (this.collapsed.has(key)) this.collapsed.delete(key);
    else this.collapsed.add(key);
    this.relayout(true);
  }

  togglePinned(key: string): void {
    if (this.pinned.has(key)) this.pinned.delete(key);
    else this.pinned.add(key);
    this.relayout(true);
  }

  setFilter(filter: string): void {
    if (filter === this.filter) return;
    this.filter = filter;
    this.relayout(false);
  }

  // ---- what is shown ------------------------------------------------------------------

  select(row: number | null): void {
    this.selectedRow = row;
    this.requestFrame();
  }

  // Outlines these slice rows (the critical path's), or nothing with null.
  outlineCritical(rows: number[] | null): void {
    this.criticalRows = rows ? new Set(rows) : null;
    this.requestFrame();
  }

  highlight(rows: number[]): void {
    this.highlightRows = new Set(rows);
    this.requestFrame();
  }

  // Marks an absolute time range (null: none) on these tracks (null: every track).
  setRange(range: [number, number] | null, tracks: number[] | null = null): void {
    this.range = range ? [range[0] - this.origin, range[1] - this.origin] : null;
    this.areaTracks = range && tracks ? new Set(tracks) : null;
    this.canvas.dataset.area = tracks ? tracks.join(",") : "all";
    this.canvas.dataset.range = String(this.rangeDuration() ?? "");
    this.requestFrame();
  }

  absoluteRange(): [number, number] | null {
    if (!this.range) return null;
    const [a, b] = this.range;
    return [Math.round(Math.min(a, b) + this.origin), Math.round(Math.max(a, b) + this.origin)];
  }

  // The marked range's exact duration in ns, or null.
  rangeDuration(): number | null {
    return this.range ? Math.abs(this.range[1] - this.range[0]) : null;
  }

  setHover(point: { x: number; y: number } | null): void {
    this.hover = point;
    this.requestFrame();
  }

  // Shows an absolute time window with a margin (a slice found).
  show(start: number, end: number): void {
    this.viewport.show(start - this.origin, end - this.origin);
    this.changed();
  }

  // Shows exactly this absolute window (a link's).
  showExactly(start: number, end: number): void {
    this.viewport.start = start - this.origin;
    this.viewport.end = end - this.origin;
    this.viewport.zoomAt(1, 0); // clamps
    this.changed();
  }

  zoom(factor: number, x = this.viewport.width / 2): void {
    this.viewport.zoomAt(factor, x);
    this.changed();
  }

  pan(pixels: number): void {
    this.viewport.panBy(pixels);
    this.changed();
  }

  absoluteWindow(): [number, number] {
    return [Math.round(this.viewport.start + this.origin), Math.round(this.viewport.end + this.origin)];
  }

  isComplete(): boolean {
    return this.firstDrawDone;
  }

  private changed(): void {
    this.requestFrame();
    const [start, end] = this.absoluteWindow();
    this.events.onWindowChange(start, end);
  }

  requestFrame(): void {
    if (this.frameRequested) return;
    this.frameRequested = true;
    requestAnimationFrame((now) => {
      this.frameRequested = false;
      this.input.applyHeldKeys(now);
      this.draw();
    });
  }

  draw(): void {
    const began = performance.now();
    const missing = drawFrame(this);
    if (missing < 0) return;
    const spent = performance.now() - began;
    this.frameTimes.push(spent);
    if (this.frameTimes.length > 10000) this.frameTimes.splice(0, 5000);
    performance.measure("opsight-frame", { start: began, duration: spent });
    if (!this.firstDrawDone && missing === 0) {
      this.firstDrawDone = true;
      performance.mark("opsight-first-draw");
      this.canvas.dataset.complete = "true";
    }
  }
}
