// Where each track sits on the timeline's canvas: a header row per process, then per
// thread, lane or async track one row per depth, then its counter tracks. A thread's task
// lanes (asyncio tasks, coroutines), a process's async tracks and its counters are gathered
// under a group header when there are two or more. The user's choices shape it: a
// collapsed process or group shows its header only, a collapsed track its top depth only;
// task lanes whose extents are known are packed into as few rows as do not overlap
// ("k:PID:TID:N", lanes.ts);
// pinned tracks come first, in a section that does not scroll; a filter keeps the tracks
// whose name (or whose process's name) contains it. Every row has a key that stays the
// same for the same run ("p:PID", "g:PID:lanes:TID", "g:PID:async", "g:PID:counters",
// "t:TRACK", "c:COUNTER"): the URL holds pinned and collapsed rows by key.
//
// A row's y is in one coordinate: the pinned section from 0 to pinnedHeight, then the
// scrolled section from pinnedHeight on (the view subtracts its scroll from those). Pure
// layout, from the server's /timeline answer.

import type { CounterTrack, TimelineLayout, TimelineTrack } from "../api";
import { packLanes, type Extent } from "./lanes";

export const LABEL_WIDTH = 200; // the label column, left of the time axis
export const RULER_HEIGHT = 24;
export const PIN_BUTTON = { from: LABEL_WIDTH - 22, to: LABEL_WIDTH - 6 }; // x range in the label column
export const PROCESS_HEADER = 22;
export const GROUP_HEADER = 18;
export const DEPTH_HEIGHT = 18;
export const TRACK_GAP = 6;
export const COUNTER_HEIGHT = 36;
export const INDENT = 12;

interface RowBase {
  key: string;
  y: number;
  height: number;
  label: string;
  indent: number; // pixels the label is moved right
  collapsed: boolean;
  pinned: boolean;
}

export type Row =
  | (RowBase & { kind: "process" })
  | (RowBase & { kind: "group"; members: number })
  | (RowBase & { kind: "track"; track: TimelineTrack; depths: number })
  | (RowBase & { kind: "packed"; tracks: TimelineTrack[]; extents: Extent[]; depths: number })
  | (RowBase & { kind: "counter"; counter: CounterTrack });

export interface LayoutChoices {
  collapsed?: ReadonlySet<string>;
  pinned?: ReadonlySet<string>;
  filter?: string;
  extents?: ReadonlyMap<number, Extent>; // of task lanes: those known are packed (lanes.ts)
}

export interface Layout {
  rows: Row[]; // pinned rows first, then the rest, each in drawing order
  height: number; // of both sections
  pinnedHeight: number;
}

type Member = { kind: "track"; track: TimelineTrack } | { kind: "counter"; counter: CounterTrack };

function memberKey(member: Member): string {
  return member.kind === "track" ? `t:${member.track.id}` : `c:${member.counter.id}`;
}

function memberLabel(member: Member): string {
  return member.kind === "track" ? member.track.name : member.counter.name;
}

export function processLabel(process: TimelineLayout["processes"][number]): string {
  const name = process.name || "process";
  const labels = process.labels.length ? ` [${process.labels.join(", ")}]` : "";
  return `${name} ${process.pid}${labels}`;
}

export function layoutRows(layout: TimelineLayout, choices: LayoutChoices = {}): Layout {
  const collapsed = choices.collapsed ?? new Set<string>();
  const pinnedKeys = choices.pinned ?? new Set<string>();
  const needle = (choices.filter ?? "").trim().toLowerCase();
  const extents = choices.extents;
  const pinned: Row[] = [];
  const scrolled: Row[] = [];
  let pinnedY = 0;
  let y = 0;

  const memberRow = (member: Member, indent: number, isPinned: boolean, top: number): Row => {
    const key = memberKey(member);
    const isCollapsed = collapsed.has(key);
    const base = { key, y: top, indent, collapsed: isCollapsed, pinned: isPinned, label: memberLabel(member) };
    if (member.kind === "counter") return { ...base, kind: "counter", height: COUNTER_HEIGHT, counter: member.counter };
    const depths = isCollapsed ? 1 : Math.max(1, member.track.depth_count);
    return { ...base, kind: "track", height: depths * DEPTH_HEIGHT, track: member.track, depths };
  };

  for (const process of layout.processes) {
    const label = processLabel(process);
    const processMatches = !needle || label.toLowerCase().includes(needle);
    const shows = (member: Member) => processMatches || memberLabel(member).toLowerCase().includes(needle);
    // The process's members in order, the grouped ones at their group's first member.
    const threadNames = new Map<number, string>();
    for (const track of process.tracks) if (track.kind === "thread") threadNames.set(track.tid, track.name);
    const groups = new Map<string, { label: string; members: Member[] }>();
    const order: (Member | string)[] = [];
    const addTo = (groupKey: string, label: string, member: Member) => {
      let group = groups.get(groupKey);
      if (!group) {
        group = { label, members: [] };
        groups.set(groupKey, group);
        order.push(groupKey);
      }
      group.members.push(member);
    };
    for (const track of process.tracks) {
      const member: Member = { kind: "track", track };
      if (track.kind === "lane") addTo(`g:${process.pid}:lanes:${track.tid}`, `tasks on ${threadNames.get(track.tid) ?? `thread ${track.tid}`}`, member);
      else if (track.kind === "async") addTo(`g:${process.pid}:async`, "async tracks", member);
      else order.push(member);
    }
    for (const counter of process.counters) addTo(`g:${process.pid}:counters`, "counters", { kind: "counter", counter });

    const processKey = `p:${process.pid}`;
    const processCollapsed = collapsed.has(processKey);
    const body: Row[] = [];
    let bodyY = 0; // relative to the process's body
    let anyShown = false;
    const place = (member: Member, indent: number) => {
      if (!shows(member)) return false;
      anyShown = true;
      if (pinnedKeys.has(memberKey(member))) {
        const row = memberRow(member, 0, true, pinnedY);
        row.label = `${memberLabel(member)} (${process.name || "pid"} ${process.pid})`;
        pinned.push(row);
        pinnedY += row.height + TRACK_GAP;
        return false;
      }
      if (processCollapsed) return true;
      const row = memberRow(member, indent, false, bodyY);
      body.push(row);
      bodyY += row.height + TRACK_GAP;
      return true;
    };
    for (const entry of order) {
      if (typeof entry !== "string") {
        place(entry, INDENT);
        continue;
      }
      const group = groups.get(entry)!;
      if (group.members.length === 1) {
        place(group.members[0], INDENT);
        continue;
      }
      const shown = group.members.filter(shows);
      if (!shown.length) continue;
      const groupCollapsed = collapsed.has(entry);
      const headerAt = body.length;
      const headerY = bodyY;
      if (!processCollapsed) bodyY += GROUP_HEADER;
      let unpinned = 0;
      const packable: { id: number; extent: Extent }[] = [];
      for (const member of shown) {
        if (groupCollapsed && !pinnedKeys.has(memberKey(member))) {
          anyShown = true;
          unpinned += 1;
          continue;
        }
        const lane = member.kind === "track" && member.track.kind === "lane" ? member.track : null;
        const extent = lane ? extents?.get(lane.id) : undefined;
        if (lane && extent && !pinnedKeys.has(memberKey(member))) {
          packable.push({ id: lane.id, extent });
          anyShown = true;
          unpinned += 1;
          continue;
        }
        if (place(member, 2 * INDENT)) unpinned += 1;
      }
      if (packable.length && !processCollapsed) {
        const tracksById = new Map(process.tracks.map((track) => [track.id, track]));
        packLanes(packable).forEach((ids, index) => {
          const tracks = ids.map((id) => tracksById.get(id)!);
          const key = `k:${entry.slice(2)}:${index}`;
          const isCollapsed = collapsed.has(key);
          const depths = isCollapsed ? 1 : Math.max(1, ...tracks.map((track) => track.depth_count));
          const names = tracks.map((track) => track.name.replace(/^asyncio /, ""));
          body.push({
            kind: "packed",
            key,
            y: bodyY,
            height: depths * DEPTH_HEIGHT,
            label: tracks.length === 1 ? tracks[0].name : `${tracks.length} tasks: ${names.join(", ")}`,
            indent: 2 * INDENT,
            collapsed: isCollapsed,
            pinned: false,
            tracks,
            extents: ids.map((id) => extents!.get(id)!),
            depths,
          });
          bodyY += depths * DEPTH_HEIGHT + TRACK_GAP;
        });
      }
      if (processCollapsed) continue;
      if (unpinned === 0) {
        bodyY -= GROUP_HEADER; // every member pinned: no header left behind
        continue;
      }
      body.splice(headerAt, 0, {
        kind: "group",
        key: entry,
        y: headerY,
        height: GROUP_HEADER,
        label: `${group.label} (${shown.length})`,
        indent: INDENT,
        collapsed: groupCollapsed,
        pinned: false,
        members: shown.length,
      });
    }
    if (!anyShown) continue;
    scrolled.push({ kind: "process", key: processKey, y, height: PROCESS_HEADER, label, indent: 0, collapsed: processCollapsed, pinned: false });
    y += PROCESS_HEADER;
    for (const row of body) {
      row.y += y;
      scrolled.push(row);
    }
    y += bodyY;
  }
  for (const row of scrolled) row.y += pinnedY;
  return { rows: [...pinned, ...scrolled], height: pinnedY + y, pinnedHeight: pinnedY };
}

// A stable colour per name (the same span always looks the same, merged or not).
export function colorOf(name: string): string {
  let hash = 2166136261;
  for (let i = 0; i < name.length; i += 1) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  const hue = (hash >>> 0) % 360;
  return `hsl(${hue}, 55%, 62%)`;
}

// The same hue, paler: a merged block (many slices in a pixel) in its longest slice's colour.
export function mergedColorOf(name: string): string {
  return colorOf(name).replace("55%, 62%", "45%, 78%");
}

// The slice tracks a row stands for (what an area drawn over it takes in): a track row its
// track, packed task lanes theirs, a folded process's or group's header every track under
// it; an open header and a counter row none (their tracks have rows of their own, counters
// have no slices).
export function tracksOfRow(layout: TimelineLayout, row: Row): number[] {
  if (row.kind === "track") return [row.track.id];
  if (row.kind === "packed") return row.tracks.map((track) => track.id);
  if (row.kind === "counter" || !row.collapsed) return [];
  const [, pid, what, tid] = row.key.split(":");
  const process = layout.processes.find((candidate) => String(candidate.pid) === pid);
  if (!process) return [];
  if (row.kind === "process") return process.tracks.map((track) => track.id);
  if (what === "lanes") return process.tracks.filter((track) => track.kind === "lane" && String(track.tid) === tid).map((track) => track.id);
  if (what === "async") return process.tracks.filter((track) => track.kind === "async").map((track) => track.id);
  return [];
}
