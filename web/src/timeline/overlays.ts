// What the timeline draws over its tiles, as pure arithmetic (tested): where a slice of a
// track at a depth sits vertically, the curve and head of a flow's arrow, and which time
// window of flows and instants to ask the server for (the visible window widened by
// itself on each side, asked again only when the view leaves it or zooms far in).

import type { Row } from "./layout";
import { DEPTH_HEIGHT } from "./layout";

// The vertical middle of depth `depth` of track `track`, in layout coordinates (below the
// ruler, see layout.ts), or null when the track is not drawn (filtered out or folded away);
// a depth folded away is drawn at the track's top.
export function trackDepthMiddle(rows: Row[], track: number, depth: number): number | null {
  for (const row of rows)
    if ((row.kind === "track" && row.track.id === track) || (row.kind === "packed" && row.tracks.some((candidate) => candidate.id === track)))
      return row.y + Math.min(depth, Math.max(0, row.depths - 1)) * DEPTH_HEIGHT + DEPTH_HEIGHT / 2;
  return null;
}

// The top of a track's row in content coordinates, or null.
export function trackTop(rows: Row[], track: number): number | null {
  for (const row of rows)
    if ((row.kind === "track" && row.track.id === track) || (row.kind === "packed" && row.tracks.some((candidate) => candidate.id === track))) return row.y;
  return null;
}

export interface Arrow {
  from: [number, number];
  control1: [number, number];
  control2: [number, number];
  to: [number, number];
  head: [[number, number], [number, number], [number, number]]; // a triangle at `to`
}

// A cubic curve from (x0, y0) to (x1, y1) that leaves and arrives horizontally, with a
// head pointing along the curve's last direction.
export function flowArrow(x0: number, y0: number, x1: number, y1: number, headSize = 6): Arrow {
  const bend = Math.max(12, Math.min(60, Math.abs(x1 - x0) / 2));
  const control1: [number, number] = [x0 + bend, y0];
  const control2: [number, number] = [x1 - bend, y1];
  // The last direction of a cubic Bezier is to - control2.
  let dx = x1 - control2[0];
  let dy = y1 - control2[1];
  const length = Math.hypot(dx, dy) || 1;
  dx /= length;
  dy /= length;
  const back: [number, number] = [x1 - dx * headSize, y1 - dy * headSize];
  const side: [number, number] = [-dy * headSize * 0.5, dx * headSize * 0.5];
  return {
    from: [x0, y0],
    control1,
    control2,
    to: [x1, y1],
    head: [
      [x1, y1],
      [back[0] + side[0], back[1] + side[1]],
      [back[0] - side[0], back[1] - side[1]],
    ],
  };
}

// The window of marks to fetch for the visible window [start, end]: the window widened by
// its own width on each side.
export function marksWindow(start: number, end: number): [number, number] {
  const span = Math.max(1, end - start);
  return [Math.floor(start - span), Math.ceil(end + span)];
}

// Whether marks fetched for `fetched` still serve the visible window: it lies inside, and
// the view has not zoomed in more than 16x since (the server's limit may have cut marks a
// closer look would show).
export function marksCover(fetched: [number, number] | null, start: number, end: number, truncated: boolean): boolean {
  if (!fetched) return false;
  if (start < fetched[0] || end > fetched[1]) return false;
  if (truncated && (fetched[1] - fetched[0]) / Math.max(1, end - start) > 16) return false;
  return true;
}
