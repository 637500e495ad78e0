// The timeline page: the canvas (timeline/timeline_view.ts), a search by name with next
// and previous, a filter of the tracks by name, and the details of the selected slice
// (args, self time, parent chain, flows), or of a range marked with shift+drag (per-name
// statistics of the slices inside it), or of an instant clicked; switches for the flows'
// arrows, the instants' markers and the critical path's outlines. Everything set here is
// in the URL (timeline/url_state.ts: window, scroll, selection, search and its current
// match, range, pinned and folded tracks, track filter, switches) and a link restores it
// as it was: the URL is not rewritten while a link is being restored.

import { apiFetch, runPath, type CriticalPathSlices, type GpuLaunch, type MarksAnswer, type SliceDetail, type SliceSummary, type TileAnswer, type TimelineLayout } from "../api";
import { h } from "../dom";
import { formatDuration } from "../format";
import { routeHref } from "../router";
import { TimelineView, type CounterTile, type InstantHit } from "../timeline/timeline_view";
import { decodeUrlState, encodeUrlState } from "../timeline/url_state";
import { packableLanes, wholeTraceLevel } from "../timeline/lanes";
import { TILE_PIXELS } from "../timeline/viewport";
import { runTabs } from "./overview";

interface RangeAnswer {
  duration_ns: number;
  slice_count: number;
  name_count: number;
  names: { name: string; count: number; total_ns: number; p50_ns: number; max_ns: number }[];
}

declare global {
  interface Window {
    opsightTimeline?: TimelineView;
  }
}

export async function timelinePage(root: HTMLElement, run: string, query: Record<string, string>): Promise<void> {
  const layout = await apiFetch<TimelineLayout>(runPath(run, "/timeline"));
  const details = h("aside", { id: "slice-details", class: "details" }, h("p", { class: "hint" }, "Click a span for its details."));
  const searchBox = h("input", { type: "search", placeholder: "search spans by name", id: "timeline-search", value: query.q ?? "" });
  const searchStatus = h("span", { id: "search-status" });
  const previous = h("button", { id: "search-previous" }, "◀ previous");
  const next = h("button", { id: "search-next" }, "next ▶");
  const holder = h("div", { class: "timeline-holder" });
  const initial = decodeUrlState(query);
  const trackFilter = h("input", { type: "search", placeholder: "filter tracks", id: "track-filter", value: initial.trackFilter });
  const flowsBox = h("input", { type: "checkbox", id: "show-flows", checked: initial.flows });
  const instantsBox = h("input", { type: "checkbox", id: "show-instants", checked: initial.instants });
  const criticalBox = h("input", { type: "checkbox", id: "show-critical", checked: initial.critical });
  const criticalStatus = h("span", { id: "critical-status", class: "hint" });
  root.replaceChildren(
    h("h1", {}, layout.label),
    runTabs(run, "timeline"),
    h(
      "div",
      { class: "toolbar" },
      searchBox,
      previous,
      next,
      searchStatus,
      trackFilter,
      h("label", { title: `${layout.flow_count ?? 0} flows in the run` }, flowsBox, " flows"),
      h("label", { title: `${layout.instant_count ?? 0} instants in the run` }, instantsBox, " instants"),
      h("label", { title: "outline the spans on the critical path (opsight report --critical-path)" }, criticalBox, " critical path"),
      criticalStatus,
      h(
        "span",
        { class: "hint", id: "timeline-keys" },
        "wheel scrolls tracks, ctrl+wheel or W/S zoom, A/D or drag pan, shift+drag measures; click a header or ▸ to fold, the pin to pin a track on top",
      ),
    ),
    h("div", { class: "timeline-page" }, holder, details),
  );

  // What the URL holds; written back only once a link's state is restored.
  const url = { ...initial };
  let restoring = true;
  const updateUrl = () => {
    // (Not once the page has been left: a late timer must not rewrite another page's URL.)
    if (restoring || !holder.isConnected) return;
    history.replaceState(null, "", routeHref({ page: "timeline", run, query: encodeUrlState(url) }));
  };
  let urlTimer = 0;
  const updateUrlSoon = () => {
    window.clearTimeout(urlTimer);
    urlTimer = window.setTimeout(updateUrl, 200);
  };
  const sources = {
    tiles: (track: number, start: number, end: number, resolution: number) =>
      apiFetch<TileAnswer>(runPath(run, "/tiles"), { track, start: Math.floor(start), end: Math.ceil(end), resolution }),
    counters: (track: number, start: number, end: number, resolution: number) =>
      apiFetch<CounterTile>(runPath(run, "/counters"), { track, start: Math.floor(start), end: Math.ceil(end), resolution }),
    marks: (start: number, end: number) => apiFetch<MarksAnswer>(runPath(run, "/marks"), { start: Math.floor(start), end: Math.ceil(end) }),
  };
  // The task lanes' whole-trace tiles, so that short tasks are packed into a few rows.
  const laneLevel = wholeTraceLevel(layout.end_ns - layout.start_ns);
  const laneTiles = new Map<number, TileAnswer>();
  await Promise.all(
    packableLanes(layout).map(async (track) => {
      const tileStart = layout.start_ns;
      const tile = await sources.tiles(track, tileStart, tileStart + TILE_PIXELS * 2 ** laneLevel, 2 ** laneLevel).catch(() => null);
      if (tile) laneTiles.set(track, tile);
    }),
  );
  const availableHeight = () => Math.max(320, window.innerHeight - holder.getBoundingClientRect().top - 16);
  const view = new TimelineView(
    layout,
    sources,
    {
      onSelect: (row) => void showSlice(row),
      onRange: (start, end) => {
        url.range = [start, end];
        updateUrl();
        void showRange(start, end);
      },
      onInstant: (instant) => showInstant(instant),
      onWindowChange: (start, end) => {
        url.window = [start, end];
        updateUrlSoon();
      },
      onTracksChange: ({ collapsed, pinned }) => {
        url.collapsed = collapsed;
        url.pinned = pinned;
        updateUrl();
      },
      onScroll: (scroll) => {
        url.scroll = scroll;
        updateUrlSoon();
      },
    },
    Math.max(600, holder.clientWidth || root.clientWidth - 340),
    availableHeight(),
    initial.window ?? undefined,
    { collapsed: initial.collapsed, pinned: initial.pinned, filter: initial.trackFilter, laneTiles },
  );
  holder.appendChild(view.canvas);
  window.opsightTimeline = view;
  view.setAvailableHeight(availableHeight());
  view.scrollTo(initial.scroll, false);
  const resize = new ResizeObserver(() => view.resize(Math.max(600, holder.clientWidth), availableHeight()));
  resize.observe(holder);
  trackFilter.addEventListener("input", () => {
    view.setFilter(trackFilter.value);
    url.trackFilter = trackFilter.value;
    updateUrl();
  });

  async function showSlice(row: number): Promise<void> {
    const slice = await apiFetch<SliceDetail>(runPath(run, `/slices/${row}`));
    view.select(row);
    url.slice = row;
    updateUrl();
    const link = (target: SliceSummary) =>
      h("a", { href: "#", class: "slice-link", on: { click: (event) => { event.preventDefault(); void focusSlice(target); } } }, target.name);
    const args = h("table", { class: "args" });
    for (const [key, value] of Object.entries(slice.args))
      args.appendChild(h("tr", {}, h("th", {}, key), h("td", {}, typeof value === "string" ? value : JSON.stringify(value))));
    details.replaceChildren(
      h("h2", { id: "slice-name" }, slice.name),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "duration"),
        h("dd", { id: "slice-duration", data: { value: slice.dur } }, formatDuration(slice.dur)),
        h("dt", {}, "self"),
        h("dd", {}, formatDuration(slice.self_ns)),
        h("dt", {}, "start"),
        h("dd", {}, formatDuration(slice.ts - layout.start_ns)),
        h("dt", {}, "category"),
        h("dd", {}, slice.category),
        h("dt", {}, "track"),
        h("dd", {}, `${slice.track_label} (pid ${slice.pid}, tid ${slice.tid})`),
        h("dt", {}, "span id"),
        h("dd", {}, slice.span_id),
      ),
      slice.launched_by ? launchedBy(slice.launched_by, link) : "",
      h("h3", {}, "args"),
      Object.keys(slice.args).length ? args : h("p", { class: "hint" }, "none"),
      h("h3", {}, "parents"),
      slice.parents.length ? h("ol", { id: "slice-parents" }, ...slice.parents.map((parent) => h("li", {}, link(parent), ` ${formatDuration(parent.dur)}`))) : h("p", { class: "hint" }, "a root"),
      slice.flows_in.length ? h("div", {}, h("h3", {}, "flows in"), h("ul", {}, ...slice.flows_in.map((s) => h("li", {}, link(s))))) : "",
      slice.flows_out.length ? h("div", {}, h("h3", {}, "flows out"), h("ul", {}, ...slice.flows_out.map((s) => h("li", {}, link(s))))) : "",
    );
  }

  function showInstant(instant: InstantHit): void {
    details.replaceChildren(
      h("h2", { id: "instant-name" }, instant.name),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "instant at"),
        h("dd", { id: "instant-time", data: { value: instant.ts } }, formatDuration(instant.ts - layout.start_ns)),
        h("dt", {}, "scope"),
        h("dd", {}, instant.scope),
      ),
    );
  }

  flowsBox.addEventListener("change", () => {
    view.showFlows = flowsBox.checked;
    view.requestFrame();
    url.flows = flowsBox.checked;
    updateUrl();
  });
  instantsBox.addEventListener("change", () => {
    view.showInstants = instantsBox.checked;
    view.requestFrame();
    url.instants = instantsBox.checked;
    updateUrl();
  });
  view.showFlows = flowsBox.checked;
  view.showInstants = instantsBox.checked;
  let critical: CriticalPathSlices | null = null;
  async function showCritical(on: boolean): Promise<void> {
    url.critical = on;
    updateUrl();
    if (!on) {
      view.outlineCritical(null);
      criticalStatus.textContent = "";
      return;
    }
    critical ??= await apiFetch<CriticalPathSlices>(runPath(run, "/critical_path_slices"));
    view.outlineCritical(critical.steps.map((step) => step[0]));
    criticalStatus.dataset.lengthNs = String(critical.length_ns);
    criticalStatus.dataset.steps = String(critical.step_count);
    criticalStatus.textContent = `critical path ${formatDuration(critical.length_ns)} (${critical.step_count} spans, idle ${formatDuration(critical.idle_ns)})`;
  }
  criticalBox.addEventListener("change", () => void showCritical(criticalBox.checked));

  async function showRange(start: number, end: number): Promise<void> {
    const range = await apiFetch<RangeAnswer>(runPath(run, "/range"), { start, end, limit: 30 });
    const rows = range.names.map((row) =>
      h(
        "tr",
        {},
        h("td", {}, row.name),
        h("td", { class: "numeric", data: { value: row.count } }, String(row.count)),
        h("td", { class: "numeric", data: { value: row.total_ns } }, formatDuration(row.total_ns)),
        h("td", { class: "numeric" }, formatDuration(row.p50_ns)),
        h("td", { class: "numeric" }, formatDuration(row.max_ns)),
      ),
    );
    details.replaceChildren(
      h("h2", { id: "range-title" }, "Range"),
      h("p", { id: "range-duration", data: { value: range.duration_ns } }, `${formatDuration(range.duration_ns)}: ${range.slice_count} slices wholly inside, ${range.name_count} names`),
      h(
        "table",
        { class: "data", id: "range-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "name"), h("th", { class: "numeric" }, "count"), h("th", { class: "numeric" }, "total"), h("th", { class: "numeric" }, "p50"), h("th", { class: "numeric" }, "max"))),
        h("tbody", {}, ...rows),
      ),
    );
  }

  async function focusSlice(target: SliceSummary): Promise<void> {
    view.show(target.ts, target.ts + target.dur);
    await showSlice(target.row);
  }

  let matches: SliceSummary[] = [];
  let current = -1;
  // Finds the spans named like the search box and highlights them. `restore`: a link's
  // current match; `jump`: show the current match (the first when none was restored), as
  // a search typed here does; a link with a window keeps its window.
  async function search(restore: number | null, jump: boolean): Promise<void> {
    const text = searchBox.value.trim();
    url.search = text;
    url.match = null;
    updateUrl();
    if (!text) {
      matches = [];
      view.highlight([]);
      searchStatus.textContent = "";
      return;
    }
    const answer = await apiFetch<{ total: number; matches: SliceSummary[] }>(runPath(run, "/search"), { q: text, limit: 1000 });
    matches = answer.matches;
    current = -1;
    view.highlight(matches.map((match) => match.row));
    searchStatus.textContent = answer.total > matches.length ? `${answer.total} matches (first ${matches.length})` : `${answer.total} matches`;
    if (!matches.length) return;
    if (restore !== null) {
      current = Math.min(restore, matches.length - 1);
      url.match = current;
      showPosition();
      if (jump) await focusSlice(matches[current]);
    } else if (jump) await step(1);
  }
  function showPosition(): void {
    searchStatus.textContent = `${current + 1} of ${matches.length}`;
    searchStatus.dataset.match = String(current);
  }
  async function step(direction: number): Promise<void> {
    if (!matches.length) return;
    current = (current + direction + matches.length) % matches.length;
    url.match = current;
    showPosition();
    await focusSlice(matches[current]);
  }
  searchBox.addEventListener("keyup", (event) => {
    if (event.key === "Enter") void search(null, true);
  });
  next.addEventListener("click", () => void step(1));
  previous.addEventListener("click", () => void step(-1));

  // A link's state: everything above is already set from it; what needs the server now.
  if (initial.search) await search(initial.match, !initial.window);
  if (initial.slice !== null) await showSlice(initial.slice);
  if (criticalBox.checked) await showCritical(true);
  if (initial.range) {
    view.setRange(initial.range);
    await showRange(initial.range[0], initial.range[1]);
  }
  if (initial.window) view.showExactly(initial.window[0], initial.window[1]);
  window.clearTimeout(urlTimer);
  restoring = false;
  view.canvas.dataset.restored = "true";
  view.canvas.focus();
}

// A GPU slice's launch: the call that launched it (a link to it) and the operator, module,
// Python function and source line open where it was made (docs/gpu.md), omitting what the
// trace does not say.
function launchedBy(launch: GpuLaunch, link: (target: SliceSummary) => HTMLElement): HTMLElement {
  const facts = h("dl", { class: "facts", id: "slice-launch" }, h("dt", {}, "call"), h("dd", {}, link(launch), ` ${formatDuration(launch.dur)}`));
  for (const [label, value] of [["operator", launch.operator], ["module", launch.module], ["python", launch.python], ["line", launch.source]])
    if (value) facts.append(h("dt", {}, label), h("dd", {}, value));
  return h("div", {}, h("h3", {}, "launched by"), facts);
}
