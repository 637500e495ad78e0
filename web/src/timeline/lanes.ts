// Many short tasks in a few rows: a thread's task lanes (one track per asyncio task, most
// living a few milliseconds) are packed greedily into rows where they do not overlap in
// time, as Perfetto packs async slices, instead of one row each. The server's /timeline
// does not say when a track begins and ends, so the page learns each lane's extent from
// one tile covering the whole trace (the same tile later stands in for finer ones while
// they load); past MAX_PACKED_LANES lanes in a run it does not ask and leaves a row each.

import type { TileAnswer, TimelineLayout } from "../api";
import { TILE_PIXELS } from "./viewport";

export const MAX_PACKED_LANES = 400;

export type Extent = [number, number]; // absolute ns

// Rows of track ids whose extents do not overlap (a gap of `gap` ns at least between
// neighbours), each track in the first row it fits, tracks taken by start time.
export function packLanes(extents: { id: number; extent: Extent }[], gap = 0): number[][] {
  const sorted = [...extents].sort((a, b) => a.extent[0] - b.extent[0] || a.id - b.id);
  const rows: { end: number; ids: number[] }[] = [];
  for (const { id, extent } of sorted) {
    const row = rows.find((candidate) => candidate.end + gap <= extent[0]);
    if (row) {
      row.ids.push(id);
      row.end = Math.max(row.end, extent[1]);
    } else rows.push({ end: extent[1], ids: [id] });
  }
  return rows.map((row) => row.ids);
}

// The level whose one tile (index 0, from the trace's start) covers the whole trace.
export function wholeTraceLevel(span: number): number {
  return Math.max(0, Math.ceil(Math.log2(Math.max(1, span) / TILE_PIXELS)));
}

// A track's extent from a tile over the whole trace: its roots' first start and last end.
export function extentOfTile(tile: TileAnswer): Extent | null {
  const roots = tile.depths[0] ?? [];
  if (!roots.length) return null;
  let end = -Infinity;
  for (const [start, duration] of roots) end = Math.max(end, start + duration);
  return [roots[0][0], end];
}

// The lane tracks worth packing: those of threads with two lanes or more, none when the
// run has more than MAX_PACKED_LANES of them.
export function packableLanes(layout: TimelineLayout): number[] {
  const ids: number[] = [];
  for (const process of layout.processes) {
    const perThread = new Map<number, number[]>();
    for (const track of process.tracks)
      if (track.kind === "lane") perThread.set(track.tid, [...(perThread.get(track.tid) ?? []), track.id]);
    for (const lanes of perThread.values()) if (lanes.length >= 2) ids.push(...lanes);
  }
  return ids.length > MAX_PACKED_LANES ? [] : ids;
}
