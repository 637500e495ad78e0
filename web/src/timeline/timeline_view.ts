// The timeline's canvas: draws the tiles of every visible track at the current window
// (tiles held are drawn at once; missing ones are fetched and drawn from a coarser tile
// meanwhile), and turns the mouse and the keyboard into zoom, pan, selection and clicks:
//   wheel: zoom around the mouse; shift+wheel or drag: pan; W/S: zoom in/out; A/D: pan;
//   click: select the slice under the mouse (or an instant's marker); shift+drag: mark a
//   range (its exact duration is shown on the ruler).
// Over the tiles: the flows of the visible window as arrows (from the end of the slice
// that sent to the start of the one that received), instants as markers (a diamond on
// their thread, a dashed line across the timeline for process and global ones), and the
// critical path's slices outlined in red when it is shown.
// Frame costs go to performance measures ("opsight-frame"), the first complete drawing to
// the mark "opsight-first-draw": what the scale benchmark reads.

import type { CounterTrack, MarksAnswer, TileAnswer, TimelineLayout } from "../api";
import { formatDuration } from "../format";
import { colorOf, DEPTH_HEIGHT, layoutRows, type Row } from "./layout";
import { flowArrow, marksCover, marksWindow, trackDepthMiddle, trackTop } from "./overlays";
import { TileCache } from "./tile_cache";
import { tilesFor, Viewport, type TileKey } from "./viewport";

export const LABEL_WIDTH = 200;
export const RULER_HEIGHT = 24;

export interface CounterTile {
  points: [number, number, number, number, number][];
}

export interface TimelineSources {
  tiles: (track: number, start: number, end: number, resolution: number) => Promise<TileAnswer>;
  counters: (track: number, start: number, end: number, resolution: number) => Promise<CounterTile>;
  marks?: (start: number, end: number) => Promise<MarksAnswer>;
}

export interface InstantHit {
  x: number;
  y: number;
  name: string;
  ts: number;
  scope: string;
}

interface HitBox {
  x: number;
  y: number;
  width: number;
  row: number;
}

export interface TimelineEvents {
  onSelect: (row: number) => void;
  onRange: (start: number, end: number) => void; // absolute ns, start <= end
  onWindowChange: (start: number, end: number) => void;
  onInstant?: (instant: InstantHit) => void;
}

export class TimelineView {
  readonly canvas: HTMLCanvasElement;
  readonly viewport: Viewport;
  readonly origin: number; // tiles are cut in time relative to the trace's start
  private readonly rows: Row[];
  private readonly contentHeight: number;
  private readonly slices: TileCache<TileAnswer>;
  private readonly counters: TileCache<CounterTile>;
  private hits: HitBox[] = [];
  private frameRequested = false;
  private firstDrawDone = false;
  private selectedRow: number | null = null;
  private highlightRows = new Set<number>();
  private range: [number, number] | null = null;
  private marks: MarksAnswer | null = null;
  private marksFetched: [number, number] | null = null; // relative to the origin
  private marksPending = false;
  private instantHits: InstantHit[] = [];
  private criticalRows: Set<number> | null = null;
  showFlows = true;
  showInstants = true;
  readonly drawn = { flows: 0, instants: 0, critical: 0 };
  private readonly keysDown = new Set<string>();
  private lastKeyFrame = 0;
  readonly frameTimes: number[] = [];

  constructor(
    layout: TimelineLayout,
    private readonly sources: TimelineSources,
    private readonly events: TimelineEvents,
    width: number,
    window?: [number, number],
  ) {
    this.origin = layout.start_ns;
    const { rows, height } = layoutRows(layout);
    this.rows = rows;
    this.contentHeight = height;
    const traceStart = 0;
    const traceEnd = Math.max(1, layout.end_ns - layout.start_ns);
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
    this.canvas = document.createElement("canvas");
    this.canvas.className = "timeline-canvas";
    this.canvas.tabIndex = 0;
    this.resize(width);
    this.listen();
  }

  resize(width: number): void {
    const ratio = window.devicePixelRatio || 1;
    const height = RULER_HEIGHT + this.contentHeight + 8;
    this.canvas.width = Math.floor(width * ratio);
    this.canvas.height = Math.floor(height * ratio);
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${height}px`;
    this.viewport.width = Math.max(100, width - LABEL_WIDTH);
    this.requestFrame();
  }

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

  // Shows an absolute time window.
  show(start: number, end: number): void {
    this.viewport.show(start - this.origin, end - this.origin);
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
      this.applyHeldKeys(now);
      this.draw();
    });
  }

  // ---- drawing ---------------------------------------------------------------------

  draw(): void {
    const began = performance.now();
    const context = this.canvas.getContext("2d");
    if (!context) return;
    const ratio = window.devicePixelRatio || 1;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    const width = this.canvas.width / ratio;
    const height = this.canvas.height / ratio;
    context.fillStyle = "#fff";
    context.fillRect(0, 0, width, height);
    this.hits = [];
    this.drawn.critical = 0;
    let missing = 0;
    context.font = "11px system-ui, sans-serif";
    context.textBaseline = "middle";
    for (const row of this.rows) {
      const top = RULER_HEIGHT + row.y;
      if (row.kind === "process") {
        context.fillStyle = "#eef1f5";
        context.fillRect(0, top, width, row.height);
        context.fillStyle = "#223";
        context.font = "bold 12px system-ui, sans-serif";
        context.fillText(row.label, 6, top + row.height / 2, width - 12);
        context.font = "11px system-ui, sans-serif";
        continue;
      }
      context.fillStyle = "#f7f7f9";
      context.fillRect(0, top, LABEL_WIDTH - 4, row.height);
      context.fillStyle = "#333";
      context.fillText(row.label, 6, top + Math.min(row.height, DEPTH_HEIGHT) / 2, LABEL_WIDTH - 14);
      context.save();
      context.beginPath();
      context.rect(LABEL_WIDTH, top, width - LABEL_WIDTH, row.height);
      context.clip();
      if (row.kind === "track") missing += this.drawTrack(context, row.track.id, top);
      else missing += this.drawCounter(context, row.counter, top, row.height);
      context.restore();
    }
    this.drawMarks(context, width, height);
    this.drawRuler(context, width);
    this.canvas.dataset.flowsDrawn = String(this.drawn.flows);
    this.canvas.dataset.instantsDrawn = String(this.drawn.instants);
    this.canvas.dataset.criticalOutlined = String(this.drawn.critical);
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

  private visibleTiles(): TileKey[] {
    return tilesFor(this.viewport.start, this.viewport.end, this.viewport.nsPerPixel());
  }

  // Draws one track's slices; returns how many of its tiles were not held yet.
  private drawTrack(context: CanvasRenderingContext2D, track: number, top: number): number {
    let missing = 0;
    for (const key of this.visibleTiles()) {
      let tile = this.slices.get(track, key);
      if (!tile) {
        missing += 1;
        tile = this.slices.coarser(track, key)?.tile;
        if (!tile) continue;
      }
      this.drawTile(context, tile, top);
    }
    return missing;
  }

  // Draws one tile's items (a block reaching into the next tile is drawn by both: the
  // same pixels twice).
  private drawTile(context: CanvasRenderingContext2D, tile: TileAnswer, top: number): void {
    const viewport = this.viewport;
    const left = LABEL_WIDTH;
    for (let depth = 0; depth < tile.depths.length; depth += 1) {
      const y = top + depth * DEPTH_HEIGHT;
      for (const [start, duration, count, row, nameIndex] of tile.depths[depth]) {
        const x0 = left + viewport.pixelAt(start - this.origin);
        const x1 = left + viewport.pixelAt(start + duration - this.origin);
        if (x1 < left || x0 > left + viewport.width) continue;
        const x = Math.max(left, x0);
        const w = Math.max(1, Math.min(left + viewport.width, x1) - x);
        const name = tile.names[nameIndex] ?? "";
        const selected = row === this.selectedRow;
        context.fillStyle = count > 1 ? "#b8bcc6" : colorOf(name);
        if (this.highlightRows.has(row)) context.fillStyle = "#ffd54a";
        // With the critical path shown, the spans off it fade and those on it are outlined
        // (when wide enough for an outline not to hide them).
        const critical = this.criticalRows?.has(row) ?? false;
        if (this.criticalRows && !critical) context.globalAlpha = 0.3;
        context.fillRect(x, y + 1, w, DEPTH_HEIGHT - 2);
        context.globalAlpha = 1;
        if (critical) {
          this.drawn.critical += 1;
          if (w >= 6) {
            context.strokeStyle = "#d0021b";
            context.lineWidth = 2;
            context.strokeRect(x + 1, y + 2, Math.max(1, w - 2), DEPTH_HEIGHT - 4);
          }
        }
        if (selected) {
          context.strokeStyle = "#000";
          context.lineWidth = 2;
          context.strokeRect(x + 1, y + 2, Math.max(1, w - 2), DEPTH_HEIGHT - 4);
        }
        if (w > 30) {
          context.fillStyle = "#111";
          const label = count > 1 ? `${name} (+${count - 1})` : name;
          context.fillText(label, x + 3, y + DEPTH_HEIGHT / 2, w - 6);
        }
        this.hits.push({ x, y, width: w, row });
      }
    }
  }

  // Fetches the flows and instants of a window around the visible one when the view left
  // the window held.
  private ensureMarks(): void {
    if (!this.sources.marks || this.marksPending) return;
    const truncated = !!this.marks && (this.marks.flow_total > this.marks.flows.length || this.marks.instant_total > this.marks.instants.length);
    if (marksCover(this.marksFetched, this.viewport.start, this.viewport.end, truncated)) return;
    const wanted = marksWindow(this.viewport.start, this.viewport.end);
    this.marksPending = true;
    this.sources
      .marks(wanted[0] + this.origin, wanted[1] + this.origin)
      .then((answer) => {
        this.marks = answer;
        this.marksFetched = wanted;
      })
      .catch(() => {
        this.marksFetched = wanted; // not again for this window
      })
      .finally(() => {
        this.marksPending = false;
        this.requestFrame();
      });
  }

  private drawMarks(context: CanvasRenderingContext2D, width: number, height: number): void {
    this.ensureMarks();
    this.instantHits = [];
    this.drawn.flows = 0;
    this.drawn.instants = 0;
    const marks = this.marks;
    if (!marks) return;
    const viewport = this.viewport;
    const xOf = (ts: number) => LABEL_WIDTH + viewport.pixelAt(ts - this.origin);
    context.save();
    context.beginPath();
    context.rect(LABEL_WIDTH, RULER_HEIGHT, width - LABEL_WIDTH, height - RULER_HEIGHT);
    context.clip();
    if (this.showInstants) {
      for (const [ts, nameIndex, track, scope] of marks.instants) {
        const x = xOf(ts);
        if (x < LABEL_WIDTH - 6 || x > width + 6) continue;
        const name = marks.names[nameIndex] ?? "";
        const top = scope === "thread" ? trackTop(this.rows, track) : null;
        if (top === null) {
          context.strokeStyle = scope === "global" ? "#7a1fa2" : "#a25a1f";
          context.setLineDash([4, 3]);
          context.lineWidth = 1;
          context.beginPath();
          context.moveTo(x + 0.5, RULER_HEIGHT);
          context.lineTo(x + 0.5, height);
          context.stroke();
          context.setLineDash([]);
          this.instantHits.push({ x, y: RULER_HEIGHT + 4, name, ts, scope });
        } else {
          const y = RULER_HEIGHT + top + 5;
          context.fillStyle = "#222";
          context.beginPath();
          context.moveTo(x, y - 5);
          context.lineTo(x + 5, y);
          context.lineTo(x, y + 5);
          context.lineTo(x - 5, y);
          context.closePath();
          context.fill();
          this.instantHits.push({ x, y, name, ts, scope });
        }
        this.drawn.instants += 1;
      }
    }
    if (this.showFlows) {
      context.strokeStyle = "rgba(20, 20, 20, 0.75)";
      context.fillStyle = "rgba(20, 20, 20, 0.75)";
      context.lineWidth = 1.2;
      for (const [, fromTs, fromTrack, fromDepth, , toTs, toTrack, toDepth] of marks.flows) {
        const y0 = trackDepthMiddle(this.rows, fromTrack, fromDepth);
        const y1 = trackDepthMiddle(this.rows, toTrack, toDepth);
        if (y0 === null || y1 === null) continue;
        const arrow = flowArrow(xOf(fromTs), RULER_HEIGHT + y0, xOf(toTs), RULER_HEIGHT + y1);
        context.beginPath();
        context.moveTo(...arrow.from);
        context.bezierCurveTo(...arrow.control1, ...arrow.control2, ...arrow.to);
        context.stroke();
        context.beginPath();
        context.moveTo(...arrow.head[0]);
        context.lineTo(...arrow.head[1]);
        context.lineTo(...arrow.head[2]);
        context.closePath();
        context.fill();
        this.drawn.flows += 1;
      }
    }
    context.restore();
  }

  private drawCounter(context: CanvasRenderingContext2D, counter: CounterTrack, top: number, height: number): number {
    let missing = 0;
    const viewport = this.viewport;
    const range = counter.max - counter.min || 1;
    const yOf = (value: number) => top + height - 2 - ((value - counter.min) / range) * (height - 4);
    context.fillStyle = "rgba(70, 120, 200, 0.35)";
    context.strokeStyle = "#4678c8";
    for (const key of this.visibleTiles()) {
      let tile = this.counters.get(counter.id, key);
      if (!tile) {
        missing += 1;
        tile = this.counters.coarser(counter.id, key)?.tile;
        if (!tile) continue;
      }
      context.beginPath();
      let first = true;
      for (const [ts, , minimum, maximum, last] of tile.points) {
        const x = LABEL_WIDTH + viewport.pixelAt(ts - this.origin);
        if (first) context.moveTo(x, yOf(last));
        context.lineTo(x, yOf(maximum));
        context.lineTo(x, yOf(minimum));
        context.lineTo(x, yOf(last));
        first = false;
      }
      context.stroke();
    }
    context.fillStyle = "#555";
    context.fillText(`${counter.max.toPrecision(4)} ${counter.unit}`, LABEL_WIDTH + 4, top + 8);
    return missing;
  }

  private drawRuler(context: CanvasRenderingContext2D, width: number): void {
    const viewport = this.viewport;
    context.fillStyle = "#fafbfc";
    context.fillRect(0, 0, width, RULER_HEIGHT);
    context.strokeStyle = "#ccd";
    context.beginPath();
    context.moveTo(0, RULER_HEIGHT - 0.5);
    context.lineTo(width, RULER_HEIGHT - 0.5);
    context.stroke();
    const step = niceStep(viewport.nsPerPixel() * 120);
    const first = Math.ceil(viewport.start / step) * step;
    context.fillStyle = "#445";
    context.font = "10px system-ui, sans-serif";
    for (let time = first; time <= viewport.end; time += step) {
      const x = LABEL_WIDTH + viewport.pixelAt(time);
      context.fillRect(x, RULER_HEIGHT - 6, 1, 6);
      context.fillText(formatDuration(time), x + 2, 9);
    }
    context.fillText(`window ${formatDuration(viewport.span)}`, 6, 9);
    if (this.range) {
      const [a, b] = this.range;
      const x0 = LABEL_WIDTH + viewport.pixelAt(Math.min(a, b));
      const x1 = LABEL_WIDTH + viewport.pixelAt(Math.max(a, b));
      context.fillStyle = "rgba(40, 100, 220, 0.12)";
      context.fillRect(x0, RULER_HEIGHT, x1 - x0, this.canvas.height);
      context.fillStyle = "#1845a0";
      context.fillRect(x0, 0, 1, this.canvas.height);
      context.fillRect(x1, 0, 1, this.canvas.height);
      context.font = "bold 11px system-ui, sans-serif";
      context.fillText(formatDuration(Math.abs(b - a)), (x0 + x1) / 2 - 20, RULER_HEIGHT - 8);
    }
  }

  // The marked range's exact duration in ns, or null.
  rangeDuration(): number | null {
    return this.range ? Math.abs(this.range[1] - this.range[0]) : null;
  }

  // ---- input -----------------------------------------------------------------------

  private hitAt(x: number, y: number): number | null {
    for (let i = this.hits.length - 1; i >= 0; i -= 1) {
      const hit = this.hits[i];
      if (x >= hit.x && x <= hit.x + hit.width && y >= hit.y && y <= hit.y + DEPTH_HEIGHT) return hit.row;
    }
    return null;
  }

  private listen(): void {
    const canvas = this.canvas;
    canvas.addEventListener(
      "wheel",
      (event) => {
        event.preventDefault();
        const x = event.offsetX - LABEL_WIDTH;
        if (event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
          this.pan(event.shiftKey ? event.deltaY : event.deltaX);
        } else {
          this.zoom(Math.exp(event.deltaY * 0.002), Math.max(0, x));
        }
      },
      { passive: false },
    );
    let dragFrom: { x: number; y: number; lastX: number; range: boolean } | null = null;
    canvas.addEventListener("mousedown", (event) => {
      canvas.focus();
      dragFrom = { x: event.offsetX, y: event.offsetY, lastX: event.offsetX, range: event.shiftKey };
      if (event.shiftKey) {
        const time = this.viewport.timeAt(event.offsetX - LABEL_WIDTH);
        this.range = [time, time];
      }
    });
    canvas.addEventListener("mousemove", (event) => {
      if (!dragFrom) return;
      if (dragFrom.range && this.range) {
        this.range = [this.range[0], this.viewport.timeAt(event.offsetX - LABEL_WIDTH)];
        this.requestFrame();
        return;
      }
      this.pan(dragFrom.lastX - event.offsetX);
      dragFrom.lastX = event.offsetX;
    });
    canvas.addEventListener("mouseup", (event) => {
      if (!dragFrom) return;
      const moved = Math.abs(event.offsetX - dragFrom.x) + Math.abs(event.offsetY - dragFrom.y);
      if (moved < 4 && !dragFrom.range) {
        const instant = this.instantHits.find((hit) => Math.abs(hit.x - event.offsetX) <= 5 && Math.abs(hit.y - event.offsetY) <= 6);
        const row = instant ? null : this.hitAt(event.offsetX, event.offsetY);
        if (instant) this.events.onInstant?.(instant);
        if (row !== null) {
          this.select(row);
          this.events.onSelect(row);
        }
      }
      if (dragFrom.range && this.range) {
        this.canvas.dataset.range = String(this.rangeDuration() ?? "");
        const [a, b] = this.range;
        this.events.onRange(Math.round(Math.min(a, b) + this.origin), Math.round(Math.max(a, b) + this.origin));
      }
      dragFrom = null;
    });
    canvas.addEventListener("keydown", (event) => {
      const key = event.key.toLowerCase();
      if (!["w", "a", "s", "d"].includes(key)) return;
      event.preventDefault();
      if (!this.keysDown.has(key)) {
        this.keysDown.add(key);
        this.lastKeyFrame = 0;
        this.applyKey(key, 1);
      }
    });
    canvas.addEventListener("keyup", (event) => {
      this.keysDown.delete(event.key.toLowerCase());
    });
    canvas.addEventListener("blur", () => this.keysDown.clear());
  }

  private applyKey(key: string, steps: number): void {
    if (key === "w") this.zoom(Math.pow(0.8, steps));
    if (key === "s") this.zoom(Math.pow(1.25, steps));
    if (key === "a") this.pan(-this.viewport.width * 0.1 * steps);
    if (key === "d") this.pan(this.viewport.width * 0.1 * steps);
  }

  // Keys held down keep zooming or panning, at a pace set by time, not by key repeats.
  private applyHeldKeys(now: number): void {
    if (this.keysDown.size === 0) return;
    if (this.lastKeyFrame !== 0) {
      const steps = Math.min(3, (now - this.lastKeyFrame) / 60);
      for (const key of this.keysDown) this.applyKey(key, steps);
    }
    this.lastKeyFrame = now;
    this.requestFrame();
  }
}

// 1, 2 or 5 times a power of ten, at or above `value`.
export function niceStep(value: number): number {
  const power = 10 ** Math.floor(Math.log10(Math.max(1, value)));
  for (const multiple of [1, 2, 5, 10]) if (multiple * power >= value) return multiple * power;
  return 10 * power;
}
