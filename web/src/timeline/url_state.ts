// Everything a user set on the timeline, as the page's URL parameters and back, so a link
// restores exactly what its author saw: the window (absolute ns), the vertical scroll, the
// selected slice, the search and which of its matches is current, the marked range and the
// tracks of its area (none: every track), the pinned and collapsed tracks (by row key, see layout.ts), the track filter and the three
// switches. Defaults are left out of the URL; decode(encode(state)) equals state.

export interface TimelineUrlState {
  window: [number, number] | null; // start=, end=
  scroll: number; // y= (pixels of the tracks scrolled off the top)
  slice: number | null; // slice=
  search: string; // q=
  match: number | null; // match= (0-based index into the search's matches)
  range: [number, number] | null; // rs=, re= (absolute ns)
  area: number[] | null; // area=ID,ID (the range's tracks; null: every track)
  pinned: string[]; // pin=KEY,KEY
  collapsed: string[]; // fold=KEY,KEY
  trackFilter: string; // tracks=
  flows: boolean; // flows=0 when off
  instants: boolean; // instants=0 when off
  critical: boolean; // critical=1 when on
}

export function defaultUrlState(): TimelineUrlState {
  return {
    window: null,
    scroll: 0,
    slice: null,
    search: "",
    match: null,
    range: null,
    area: null,
    pinned: [],
    collapsed: [],
    trackFilter: "",
    flows: true,
    instants: true,
    critical: false,
  };
}

function integer(text: string | undefined): number | null {
  if (text === undefined || text.trim() === "") return null;
  const value = Number(text);
  return Number.isFinite(value) ? Math.round(value) : null;
}

function keyList(text: string | undefined): string[] {
  return (text ?? "").split(",").filter((key) => key !== "");
}

export function decodeUrlState(query: Record<string, string>): TimelineUrlState {
  const state = defaultUrlState();
  const start = integer(query.start);
  const end = integer(query.end);
  if (start !== null && end !== null && end > start) state.window = [start, end];
  state.scroll = Math.max(0, integer(query.y) ?? 0);
  state.slice = integer(query.slice);
  state.search = query.q ?? "";
  const match = integer(query.match);
  state.match = state.search && match !== null && match >= 0 ? match : null;
  const rangeStart = integer(query.rs);
  const rangeEnd = integer(query.re);
  if (rangeStart !== null && rangeEnd !== null) state.range = [Math.min(rangeStart, rangeEnd), Math.max(rangeStart, rangeEnd)];
  if (state.range && query.area) {
    const tracks = keyList(query.area).map(Number).filter((id) => Number.isInteger(id) && id >= 0);
    state.area = tracks.length ? tracks : null;
  }
  state.pinned = keyList(query.pin);
  state.collapsed = keyList(query.fold);
  state.trackFilter = query.tracks ?? "";
  state.flows = query.flows !== "0";
  state.instants = query.instants !== "0";
  state.critical = query.critical === "1";
  return state;
}

export function encodeUrlState(state: TimelineUrlState): Record<string, string> {
  const query: Record<string, string> = {};
  if (state.window) {
    query.start = String(Math.round(state.window[0]));
    query.end = String(Math.round(state.window[1]));
  }
  if (state.scroll > 0) query.y = String(Math.round(state.scroll));
  if (state.slice !== null) query.slice = String(state.slice);
  if (state.search) {
    query.q = state.search;
    if (state.match !== null) query.match = String(state.match);
  }
  if (state.range) {
    query.rs = String(Math.round(state.range[0]));
    query.re = String(Math.round(state.range[1]));
    if (state.area) query.area = state.area.join(",");
  }
  if (state.pinned.length) query.pin = state.pinned.join(",");
  if (state.collapsed.length) query.fold = state.collapsed.join(",");
  if (state.trackFilter) query.tracks = state.trackFilter;
  if (!state.flows) query.flows = "0";
  if (!state.instants) query.instants = "0";
  if (state.critical) query.critical = "1";
  return query;
}
