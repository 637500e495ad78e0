// One frame of the timeline, drawn from a TimelineView's state (never waiting for the
// network: tiles held are drawn, a coarser held tile stands in for a missing one, and what
// is missing is asked for). From the bottom up: the tracks' section that scrolls, the
// pinned tracks' section, the flows' arrows and the instants' markers, the marked range and
// the hover line with each counter's value there, then the ruler (always at the top) and a
// scroll bar.
//   Slices are coloured by name (a stable hash); a merged block (many slices narrower than
//   a pixel, named after its longest slice) takes its name's paler colour, and a run of
//   merged blocks is labelled with its busiest names ("op ×120 · infer ×8", counted from
//   the blocks' names and counts). Labels that do not fit are elided ("encoder.lay…").
//   Counters are drawn as steps (a value held until the next sample).
// Writes what it drew for clicks (view.sliceHits, view.instantHits) and for the tests
// (canvas data attributes).

import { formatDuration } from "../format";
import { counterUnit, counterValueAt, formatCounterValue, stepOutline } from "./counters";
import { elide, TextMeasure } from "./elide";
import { colorOf, DEPTH_HEIGHT, LABEL_WIDTH, mergedColorOf, PIN_BUTTON, RULER_HEIGHT, tracksOfRow, type Row } from "./layout";
import { flowArrow, marksCover, marksWindow, trackDepthMiddle, trackTop } from "./overlays";
import { rulerTicks } from "./ruler";
import type { TimelineView } from "./timeline_view";
import { tileRange, tilesFor, type TileKey } from "./viewport";
import type { TileAnswer } from "../api";

export interface SliceHit {
  x: number;
  y: number;
  width: number;
  row: number;
}

export interface InstantHit {
  x: number;
  y: number;
  name: string;
  ts: number;
  scope: string;
}

const FONT = "11px system-ui, sans-serif";
const BOLD_FONT = "bold 12px system-ui, sans-serif";

const colors = new Map<string, string>();
const mergedColors = new Map<string, string>();
function cachedColor(cache: Map<string, string>, name: string, make: (name: string) => string): string {
  let color = cache.get(name);
  if (color === undefined) {
    if (cache.size > 50000) cache.clear();
    color = make(name);
    cache.set(name, color);
  }
  return color;
}

const measures = new WeakMap<CanvasRenderingContext2D, TextMeasure>();

// Whether a row folds to its top depth (a track or packed lanes deeper than one).
export function isFoldable(row: Row): boolean {
  if (row.kind === "track") return row.track.depth_count > 1;
  if (row.kind === "packed") return row.tracks.some((track) => track.depth_count > 1);
  return false;
}

// Draws a frame; returns how many visible tiles were missing (-1: no canvas context).
export function drawFrame(view: TimelineView): number {
  const context = view.canvas.getContext("2d");
  if (!context) return -1;
  let measure = measures.get(context);
  if (!measure) {
    measure = new TextMeasure(context);
    measures.set(context, measure);
  }
  return new FramePainter(view, context, measure).paint();
}

class FramePainter {
  private readonly width: number;
  private readonly height: number;
  private readonly tiles: TileKey[];
  private missing = 0;

  constructor(
    private readonly view: TimelineView,
    private readonly context: CanvasRenderingContext2D,
    private readonly measure: TextMeasure,
  ) {
    const ratio = window.devicePixelRatio || 1;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    this.width = view.canvas.width / ratio;
    this.height = view.height;
    const viewport = view.viewport;
    this.tiles = tilesFor(viewport.start, viewport.end, viewport.nsPerPixel());
  }

  paint(): number {
    const { context, view } = this;
    context.fillStyle = "#fff";
    context.fillRect(0, 0, this.width, this.height);
    context.textBaseline = "middle";
    view.sliceHits = [];
    view.drawn.critical = 0;
    this.gridLines();
    const pinnedBottom = RULER_HEIGHT + view.layout.pinnedHeight;
    this.section(false, pinnedBottom, this.height);
    if (view.layout.pinnedHeight > 0) {
      this.section(true, RULER_HEIGHT, pinnedBottom);
      context.fillStyle = "#9aa3b5";
      context.fillRect(0, pinnedBottom - 2, this.width, 2);
    }
    this.marks();
    this.rangeShade();
    this.hoverReadout();
    this.ruler();
    this.scrollBar(pinnedBottom);
    const canvas = view.canvas;
    canvas.dataset.flowsDrawn = String(view.drawn.flows);
    canvas.dataset.instantsDrawn = String(view.drawn.instants);
    canvas.dataset.criticalOutlined = String(view.drawn.critical);
    canvas.dataset.scroll = String(view.scroll);
    return this.missing;
  }

  private xOf(time: number): number {
    return LABEL_WIDTH + this.view.viewport.pixelAt(time);
  }

  private gridLines(): void {
    const { context, view } = this;
    context.fillStyle = "#f0f1f4";
    for (const tick of rulerTicks(view.viewport.start, view.viewport.end, view.viewport.width)) {
      const x = Math.round(this.xOf(tick.time));
      if (x >= LABEL_WIDTH) context.fillRect(x, RULER_HEIGHT, 1, this.height - RULER_HEIGHT);
    }
  }

  // The rows of one section (pinned or scrolled) that fall inside [top, bottom).
  private section(pinned: boolean, top: number, bottom: number): void {
    const { context, view } = this;
    context.save();
    context.beginPath();
    context.rect(0, top, this.width, bottom - top);
    context.clip();
    if (pinned) {
      context.fillStyle = "#fffbea";
      context.fillRect(0, top, this.width, bottom - top);
    }
    for (const row of view.layout.rows) {
      if (row.pinned !== pinned) continue;
      const y = view.screenY(row.y);
      if (y + row.height < top || y > bottom) continue;
      this.row(row, y);
    }
    context.restore();
  }

  private triangle(x: number, y: number, open: boolean): void {
    const context = this.context;
    context.fillStyle = "#556";
    context.beginPath();
    if (open) {
      context.moveTo(x, y - 3);
      context.lineTo(x + 8, y - 3);
      context.lineTo(x + 4, y + 3);
    } else {
      context.moveTo(x + 1, y - 4);
      context.lineTo(x + 7, y);
      context.lineTo(x + 1, y + 4);
    }
    context.closePath();
    context.fill();
  }

  private label(text: string, x: number, y: number, maxWidth: number, color: string): void {
    const shown = elide(text, maxWidth, this.measure.measure);
    if (!shown) return;
    this.context.fillStyle = color;
    this.context.fillText(shown, x, y);
  }

  private row(row: Row, top: number): void {
    const { context, view } = this;
    const middle = top + Math.min(row.height, DEPTH_HEIGHT) / 2;
    if (row.kind === "process" || row.kind === "group") {
      context.fillStyle = row.kind === "process" ? "#eef1f5" : "#f5f6f9";
      context.fillRect(0, top, this.width, row.height);
      this.triangle(6 + row.indent, top + row.height / 2, !row.collapsed);
      context.font = row.kind === "process" ? BOLD_FONT : FONT;
      this.label(row.label, 18 + row.indent, top + row.height / 2, this.width - 30 - row.indent, "#223");
      context.font = FONT;
      return;
    }
    context.font = FONT;
    context.fillStyle = row.pinned ? "#fff3c4" : "#f7f7f9";
    context.fillRect(0, top, LABEL_WIDTH - 4, row.height);
    if (isFoldable(row)) this.triangle(4 + row.indent, middle, !row.collapsed);
    this.label(row.label, 16 + row.indent, middle, PIN_BUTTON.from - 18 - row.indent, "#333");
    if (row.kind !== "packed") this.pin(row.pinned, middle);
    context.save();
    context.beginPath();
    context.rect(LABEL_WIDTH, top, this.width - LABEL_WIDTH, row.height);
    context.clip();
    if (row.kind === "track") this.track(row.track.id, top, row.depths);
    else if (row.kind === "packed") {
      // Only the lanes alive in the window: the others have nothing to draw or fetch.
      const { start, end } = view.viewport;
      row.tracks.forEach((track, index) => {
        const [from, to] = row.extents[index];
        if (to - view.origin >= start && from - view.origin <= end) this.track(track.id, top, row.depths);
      });
    } else this.counter(row, top);
    context.restore();
  }

  // A pin: a head and a needle, filled when pinned, faint when not.
  private pin(pinned: boolean, middle: number): void {
    const context = this.context;
    const x = (PIN_BUTTON.from + PIN_BUTTON.to) / 2;
    context.fillStyle = pinned ? "#c0392b" : "#c8cbd3";
    context.beginPath();
    context.arc(x, middle - 2, 3.5, 0, 2 * Math.PI);
    context.fill();
    context.fillRect(x - 0.5, middle, 1.2, 6);
  }

  // ---- slices ----------------------------------------------------------------------

  private track(track: number, top: number, depths: number): void {
    const tiles: TileAnswer[] = [];
    for (const key of this.tiles) {
      let tile = this.view.slices.get(track, key);
      if (!tile) {
        this.missing += 1;
        tile = this.view.slices.coarser(track, key)?.tile;
        if (!tile) continue;
      }
      if (tiles[tiles.length - 1] !== tile) tiles.push(tile); // one coarser tile may stand in for several
    }
    this.blocks(tiles, top, depths);
  }

  // The tiles' items, depth by depth across the tiles, so that a run of merged blocks is
  // summarized once where it crosses from one tile into the next; a block reaching into
  // the next tile is in both, and drawn and counted once.
  private blocks(tiles: TileAnswer[], top: number, depths: number): void {
    const { context, view } = this;
    const viewport = view.viewport;
    const left = LABEL_WIDTH;
    const right = left + viewport.width;
    const origin = view.origin;
    let deepest = 0;
    for (const tile of tiles) deepest = Math.max(deepest, tile.depths.length);
    for (let depth = 0; depth < deepest && depth < depths; depth += 1) {
      const y = top + depth * DEPTH_HEIGHT;
      // The run of merged blocks being drawn, labelled once it ends.
      const run = { active: false, from: 0, to: 0, counts: new Map<string, number>() };
      const flush = () => {
        if (run.active && run.to - run.from > 40) this.mergedLabel(run.counts, run.from, run.to, y);
        run.active = false;
      };
      let previousRow = -1;
      let previousStart = NaN;
      for (const tile of tiles) {
        for (const [start, duration, count, row, nameIndex] of tile.depths[depth] ?? []) {
          if (row === previousRow && start === previousStart) continue; // the previous tile's
          previousRow = row;
          previousStart = start;
          const x0 = left + viewport.pixelAt(start - origin);
          const x1 = left + viewport.pixelAt(start + duration - origin);
          if (x1 < left || x0 > right) continue;
          const x = Math.max(left, x0);
          const w = Math.max(1, Math.min(right, x1) - x);
          const name = tile.names[nameIndex] ?? "";
          const merged = count > 1;
          if (view.highlightRows.has(row)) context.fillStyle = "#ffd54a";
          else context.fillStyle = merged ? cachedColor(mergedColors, name, mergedColorOf) : cachedColor(colors, name, colorOf);
          // With the critical path shown, the spans off it fade and those on it are outlined
          // (when wide enough for an outline not to hide them).
          const critical = view.criticalRows?.has(row) ?? false;
          if (view.criticalRows && !critical) context.globalAlpha = 0.3;
          context.fillRect(x, y + 1, w, DEPTH_HEIGHT - 2);
          context.globalAlpha = 1;
          if (critical) {
            view.drawn.critical += 1;
            if (w >= 6) {
              context.strokeStyle = "#d0021b";
              context.lineWidth = 2;
              context.strokeRect(x + 1, y + 2, Math.max(1, w - 2), DEPTH_HEIGHT - 4);
            }
          }
          if (row === view.selectedRow) {
            context.strokeStyle = "#000";
            context.lineWidth = 2;
            context.strokeRect(x + 1, y + 2, Math.max(1, w - 2), DEPTH_HEIGHT - 4);
          }
          if (merged) {
            if (run.active && x <= run.to + 2) run.to = Math.max(run.to, x + w);
            else {
              flush();
              run.active = true;
              run.from = x;
              run.to = x + w;
              run.counts.clear();
            }
            run.counts.set(name, (run.counts.get(name) ?? 0) + count);
          } else {
            flush();
            if (w > 24) this.label(name, x + 3, y + DEPTH_HEIGHT / 2, w - 6, "#111");
          }
          view.sliceHits.push({ x, y, width: w, row });
        }
      }
      flush();
    }
  }

  // A dense region's summary: its busiest names with the slices they stand for.
  private mergedLabel(counts: Map<string, number>, from: number, to: number, y: number): void {
    const busiest = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3);
    const text = busiest.map(([name, count]) => `${name} ×${count}`).join(" · ");
    this.label(text, from + 3, y + DEPTH_HEIGHT / 2, to - from - 6, "#222");
  }

  // ---- counters --------------------------------------------------------------------

  private counter(row: Extract<Row, { kind: "counter" }>, top: number): void {
    const { context, view } = this;
    const counter = row.counter;
    const unit = counterUnit(counter.name, counter.unit);
    const range = counter.max - counter.min || 1;
    const bottom = top + row.height - 2;
    const yOf = (value: number) => bottom - ((value - counter.min) / range) * (row.height - 6);
    const traceEnd = view.timeline.end_ns - view.origin;
    context.fillStyle = "rgba(70, 120, 200, 0.25)";
    context.strokeStyle = "#3f6fc0";
    context.lineWidth = 1;
    for (const key of this.tiles) {
      let tile = view.counters.get(counter.id, key);
      let tileKey = key;
      if (!tile) {
        this.missing += 1;
        const coarser = view.counters.coarser(counter.id, key);
        tile = coarser?.tile;
        if (!coarser) continue;
        tileKey = coarser.key;
      }
      const points = tile!.points;
      if (!points.length) continue;
      const tileEnd = Math.min(tileRange(tileKey.level, tileKey.index)[1], traceEnd);
      const lastX = this.xOf(points[points.length - 1][0] - view.origin);
      const outline = stepOutline(points, (ts) => this.xOf(ts - view.origin), yOf, Math.max(lastX, this.xOf(tileEnd)));
      context.beginPath();
      context.moveTo(outline[0][0], bottom);
      for (const [x, y] of outline) context.lineTo(x, y);
      context.lineTo(outline[outline.length - 1][0], bottom);
      context.closePath();
      context.fill();
      context.beginPath();
      context.moveTo(outline[0][0], outline[0][1]);
      for (const [x, y] of outline) context.lineTo(x, y);
      context.stroke();
    }
    context.font = FONT;
    const text = elide(`max ${formatCounterValue(counter.max, unit)}`, 160, this.measure.measure);
    context.fillStyle = "rgba(255, 255, 255, 0.8)";
    context.fillRect(LABEL_WIDTH + 2, top + 1, this.measure.measure(text) + 4, 14);
    context.fillStyle = "#445";
    context.fillText(text, LABEL_WIDTH + 4, top + 8);
  }

  // The vertical line under the mouse and, on each counter drawn, its value there.
  private hoverReadout(): void {
    const { context, view } = this;
    const hover = view.hover;
    if (!hover || hover.x < LABEL_WIDTH || hover.y < RULER_HEIGHT) {
      delete view.canvas.dataset.hover;
      return;
    }
    const time = view.viewport.timeAt(hover.x - LABEL_WIDTH);
    context.fillStyle = "rgba(30, 30, 60, 0.45)";
    context.fillRect(Math.round(hover.x), RULER_HEIGHT, 1, this.height - RULER_HEIGHT);
    const level = this.tiles[0]?.level ?? 0;
    const values: { counter: number; time: number; value: number | null }[] = [];
    for (const row of view.layout.rows) {
      if (row.kind !== "counter") continue;
      const top = view.screenY(row.y);
      if (top + row.height < RULER_HEIGHT || top > this.height) continue;
      const index = Math.floor(time / tileRange(level, 0)[1]);
      const key = { level, index };
      const tile = view.counters.get(row.counter.id, key) ?? view.counters.coarser(row.counter.id, key)?.tile;
      const value = tile ? counterValueAt(tile.points, time + view.origin) : null;
      values.push({ counter: row.counter.id, time: Math.round(time + view.origin), value });
      if (value === null) continue;
      const text = formatCounterValue(value, counterUnit(row.counter.name, row.counter.unit));
      context.font = "bold 11px system-ui, sans-serif";
      const width = this.measure.measure(text) + 8;
      const x = hover.x + 6 + width > this.width ? hover.x - 6 - width : hover.x + 6;
      context.fillStyle = "rgba(255, 255, 255, 0.9)";
      context.fillRect(x, top + row.height / 2 - 8, width, 16);
      context.strokeStyle = "#3f6fc0";
      context.strokeRect(x + 0.5, top + row.height / 2 - 7.5, width - 1, 15);
      context.fillStyle = "#123";
      context.fillText(text, x + 4, top + row.height / 2);
    }
    context.font = FONT;
    view.canvas.dataset.hover = JSON.stringify({ time: Math.round(time + view.origin), counters: values });
  }

  // ---- flows and instants ----------------------------------------------------------

  // Fetches the flows and instants of a window around the visible one when the view left
  // the window held.
  private ensureMarks(): void {
    const view = this.view;
    if (!view.sources.marks || view.marksPending) return;
    const held = view.marks;
    const truncated = !!held && (held.flow_total > held.flows.length || held.instant_total > held.instants.length);
    if (marksCover(view.marksFetched, view.viewport.start, view.viewport.end, truncated)) return;
    const wanted = marksWindow(view.viewport.start, view.viewport.end);
    view.marksPending = true;
    view.sources
      .marks(wanted[0] + view.origin, wanted[1] + view.origin)
      .then((answer) => {
        view.marks = answer;
        view.marksFetched = wanted;
      })
      .catch(() => {
        view.marksFetched = wanted; // not again for this window
      })
      .finally(() => {
        view.marksPending = false;
        view.requestFrame();
      });
  }

  private marks(): void {
    const { context, view, width, height } = this;
    this.ensureMarks();
    view.instantHits = [];
    view.drawn.flows = 0;
    view.drawn.instants = 0;
    const marks = view.marks;
    if (!marks) return;
    const rows = view.layout.rows;
    const xOf = (ts: number) => this.xOf(ts - view.origin);
    context.save();
    context.beginPath();
    context.rect(LABEL_WIDTH, RULER_HEIGHT, width - LABEL_WIDTH, height - RULER_HEIGHT);
    context.clip();
    if (view.showInstants) {
      for (const [ts, nameIndex, track, scope] of marks.instants) {
        const x = xOf(ts);
        if (x < LABEL_WIDTH - 6 || x > width + 6) continue;
        const name = marks.names[nameIndex] ?? "";
        const top = scope === "thread" ? trackTop(rows, track) : null;
        if (top === null) {
          context.strokeStyle = scope === "global" ? "#7a1fa2" : "#a25a1f";
          context.setLineDash([4, 3]);
          context.lineWidth = 1;
          context.beginPath();
          context.moveTo(x + 0.5, RULER_HEIGHT);
          context.lineTo(x + 0.5, height);
          context.stroke();
          context.setLineDash([]);
          view.instantHits.push({ x, y: RULER_HEIGHT + 4, name, ts, scope });
        } else {
          const y = view.screenY(top) + 5;
          context.fillStyle = "#222";
          context.beginPath();
          context.moveTo(x, y - 5);
          context.lineTo(x + 5, y);
          context.lineTo(x, y + 5);
          context.lineTo(x - 5, y);
          context.closePath();
          context.fill();
          view.instantHits.push({ x, y, name, ts, scope });
        }
        view.drawn.instants += 1;
      }
    }
    if (view.showFlows) {
      context.strokeStyle = "rgba(20, 20, 20, 0.75)";
      context.fillStyle = "rgba(20, 20, 20, 0.75)";
      context.lineWidth = 1.2;
      for (const [, fromTs, fromTrack, fromDepth, , toTs, toTrack, toDepth] of marks.flows) {
        const y0 = trackDepthMiddle(rows, fromTrack, fromDepth);
        const y1 = trackDepthMiddle(rows, toTrack, toDepth);
        if (y0 === null || y1 === null) continue;
        const arrow = flowArrow(xOf(fromTs), view.screenY(y0), xOf(toTs), view.screenY(y1));
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
        view.drawn.flows += 1;
      }
    }
    context.restore();
  }

  // ---- range, ruler, scroll bar ------------------------------------------------------

  private rangeEdges(): [number, number] | null {
    const range = this.view.range;
    if (!range) return null;
    return [this.xOf(Math.min(range[0], range[1])), this.xOf(Math.max(range[0], range[1]))];
  }

  private rangeShade(): void {
    const edges = this.rangeEdges();
    if (!edges) return;
    const { context } = this;
    const [x0, x1] = edges;
    context.save();
    context.beginPath();
    context.rect(LABEL_WIDTH, 0, this.width - LABEL_WIDTH, this.height);
    context.clip();
    const area = this.view.areaTracks;
    if (!area) {
      context.fillStyle = "rgba(40, 100, 220, 0.12)";
      context.fillRect(x0, RULER_HEIGHT, x1 - x0, this.height - RULER_HEIGHT);
    } else {
      // An area: the range shaded lightly, its tracks' rows darker and outlined.
      context.fillStyle = "rgba(40, 100, 220, 0.05)";
      context.fillRect(x0, RULER_HEIGHT, x1 - x0, this.height - RULER_HEIGHT);
      const view = this.view;
      const pinnedBottom = RULER_HEIGHT + view.layout.pinnedHeight;
      for (const row of view.layout.rows) {
        if (!tracksOfRow(view.timeline, row).some((track) => area.has(track))) continue;
        const top = Math.max(view.screenY(row.y), row.pinned ? RULER_HEIGHT : pinnedBottom);
        const bottom = Math.min(view.screenY(row.y) + row.height, this.height);
        if (bottom <= top) continue;
        context.fillStyle = "rgba(40, 100, 220, 0.2)";
        context.fillRect(x0, top, x1 - x0, bottom - top);
        context.strokeStyle = "rgba(24, 69, 160, 0.8)";
        context.lineWidth = 1;
        context.strokeRect(x0 + 0.5, top + 0.5, Math.max(0, x1 - x0 - 1), bottom - top - 1);
      }
    }
    context.fillStyle = "#1845a0";
    context.fillRect(x0, 0, 1, this.height);
    context.fillRect(x1, 0, 1, this.height);
    context.restore();
  }

  private ruler(): void {
    const { context, view, width } = this;
    const viewport = view.viewport;
    context.fillStyle = "#fafbfc";
    context.fillRect(0, 0, width, RULER_HEIGHT);
    context.fillStyle = "#ccd";
    context.fillRect(0, RULER_HEIGHT - 1, width, 1);
    context.font = "10px system-ui, sans-serif";
    context.save();
    context.beginPath();
    context.rect(LABEL_WIDTH, 0, width - LABEL_WIDTH, RULER_HEIGHT);
    context.clip();
    context.fillStyle = "#445";
    for (const tick of rulerTicks(viewport.start, viewport.end, viewport.width)) {
      const x = Math.round(this.xOf(tick.time));
      context.fillRect(x, RULER_HEIGHT - 7, 1, 7);
      context.fillText(tick.label, x + 3, 9);
    }
    const edges = this.rangeEdges();
    if (edges && view.range) {
      const [x0, x1] = edges;
      context.fillStyle = "#1845a0";
      context.fillRect(x0, 0, 1, RULER_HEIGHT);
      context.fillRect(x1, 0, 1, RULER_HEIGHT);
      context.font = "bold 11px system-ui, sans-serif";
      const text = formatDuration(Math.abs(view.range[1] - view.range[0]));
      const textWidth = this.measure.measure(text) + 10;
      const middle = Math.min(Math.max((x0 + x1) / 2, LABEL_WIDTH + textWidth / 2), width - textWidth / 2);
      context.fillRect(middle - textWidth / 2, 3, textWidth, RULER_HEIGHT - 6);
      context.fillStyle = "#fff";
      context.fillText(text, middle - textWidth / 2 + 5, RULER_HEIGHT / 2);
    }
    context.restore();
    context.fillStyle = "#445";
    context.font = "10px system-ui, sans-serif";
    context.fillText(`window ${formatDuration(viewport.span)}`, 6, RULER_HEIGHT / 2);
    context.font = FONT;
  }

  private scrollBar(top: number): void {
    const { context, view } = this;
    const maxScroll = view.maxScroll();
    if (maxScroll <= 0) return;
    const trackHeight = this.height - top;
    const total = trackHeight + maxScroll;
    const thumb = Math.max(20, (trackHeight * trackHeight) / total);
    const y = top + ((trackHeight - thumb) * view.scroll) / maxScroll;
    context.fillStyle = "rgba(60, 60, 80, 0.35)";
    context.fillRect(this.width - 6, y, 5, thumb);
  }
}
