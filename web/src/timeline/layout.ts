// Where each track sits on the timeline's canvas: a header row per process, then per
// thread, lane or async track one row per depth, then its counter tracks. Pure layout,
// from the server's /timeline answer.

import type { CounterTrack, TimelineLayout, TimelineTrack } from "../api";

export const PROCESS_HEADER = 22;
export const DEPTH_HEIGHT = 18;
export const TRACK_GAP = 6;
export const COUNTER_HEIGHT = 36;

export type Row =
  | { kind: "process"; y: number; height: number; label: string }
  | { kind: "track"; y: number; height: number; label: string; track: TimelineTrack }
  | { kind: "counter"; y: number; height: number; label: string; counter: CounterTrack };

export function layoutRows(layout: TimelineLayout): { rows: Row[]; height: number } {
  const rows: Row[] = [];
  let y = 0;
  for (const process of layout.processes) {
    const name = process.name || "process";
    const labels = process.labels.length ? ` [${process.labels.join(", ")}]` : "";
    rows.push({ kind: "process", y, height: PROCESS_HEADER, label: `${name} ${process.pid}${labels}` });
    y += PROCESS_HEADER;
    for (const track of process.tracks) {
      const height = Math.max(1, track.depth_count) * DEPTH_HEIGHT;
      rows.push({ kind: "track", y, height, label: track.name, track });
      y += height + TRACK_GAP;
    }
    for (const counter of process.counters) {
      rows.push({ kind: "counter", y, height: COUNTER_HEIGHT, label: counter.name, counter });
      y += COUNTER_HEIGHT + TRACK_GAP;
    }
  }
  return { rows, height: y };
}

// A stable colour per name (the same span always looks the same).
export function colorOf(name: string): string {
  let hash = 2166136261;
  for (let i = 0; i < name.length; i += 1) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  const hue = (hash >>> 0) % 360;
  return `hsl(${hue}, 55%, 62%)`;
}
