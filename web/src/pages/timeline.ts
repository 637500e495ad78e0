// The timeline page: the canvas (timeline/timeline_view.ts), a search of names and args
// ("k of N" with N exact; next and previous step through every match, a page of them
// fetched at a time), a filter of the tracks by name, and the details of the selected
// slice (args, self time, parent chain, flows), or of an area marked with shift+drag (a
// time range on the tracks the drag crossed: per track and per name, clipped to the range,
// as Perfetto's "Slices" tab; then the per-name statistics of the slices wholly inside the
// range on every track), or of an instant clicked; switches for the flows'
// arrows, the instants' markers and the critical path's outlines. Everything set here is
// in the URL (timeline/url_state.ts: window, scroll, selection, search and its current
// match, range and its area's tracks, pinned and folded tracks, track filter, switches) and a link restores it
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

interface AreaAnswer {
  duration_ns: number;
  slice_count: number;
  track_count: number;
  tracks: { track: number; name: string; pid: number; tid: number; slice_count: number; busy_ns: number }[];
  name_count: number;
  names: { name: string; count: number; wall_ns: number; self_ns: number; average_ns: number }[];
}

interface SearchAnswer {
  total: number;
  offset: number;
  matches: SliceSummary[];
}

// Matches fetched at a time (the search's page).
const SEARCH_PAGE = 1000;

declare global {
  interface Window {
    opsightTimeline?: TimelineView;
  }
}

export async function timelinePage(root: HTMLElement, run: string, query: Record<string, string>): Promise<void> {
  const layout = await apiFetch<TimelineLayout>(runPath(run, "/timeline"));
  const details = h("aside", { id: "slice-details", class: "details" }, h("p", { class: "hint" }, "Click a span for its details."));
  const searchBox = h("input", { type: "search", placeholder: "search names, args", title: "text: names and arg values; name:TEXT names only; arg:TEXT arg values only; arg:KEY=TEXT the arg KEY's value (arg:KEY= any value); trace:ID every span of the trace ID", id: "timeline-search", value: query.q ?? "" });
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
        "wheel scrolls tracks, ctrl+wheel or W/S zoom, A/D or drag pan, shift+drag marks an area (from the ruler: every track); click a header or ▸ to fold, the pin to pin a track on top",
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
      onRange: (start, end, tracks) => {
        url.range = [start, end];
        url.area = tracks;
        updateUrl();
        void showRange(start, end, tracks);
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
        h("dd", { id: "slice-span-id" }, slice.span_id),
        h("dt", {}, "parent span"),
        h("dd", { id: "slice-parent-span-id" }, slice.parent_span_id ?? "none (begins its trace)"),
        h("dt", {}, "trace id"),
        h(
          "dd",
          {},
          h("span", { id: "slice-trace-id" }, slice.trace_id),
          " ",
          h(
            "a",
            {
              href: "#",
              id: "slice-trace-spans",
              title: `search trace:${slice.trace_id}`,
              on: {
                click: (event) => {
                  event.preventDefault();
                  searchBox.value = `trace:${slice.trace_id}`;
                  void search(null, false);
                },
              },
            },
            "spans of this trace",
          ),
        ),
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

  // An area: per track and per name inside the range (/area, clipped), then the per-name
  // statistics of the slices wholly inside the range on every track (/range).
  async function showRange(start: number, end: number, tracks: number[] | null): Promise<void> {
    // (A drag over counters only crosses no slice track: an empty area, not every track.)
    const noArea: AreaAnswer = { duration_ns: end - start, slice_count: 0, track_count: 0, tracks: [], name_count: 0, names: [] };
    const [area, range] = await Promise.all([
      tracks && !tracks.length ? noArea : apiFetch<AreaAnswer>(runPath(run, "/area"), { start, end, limit: 50, tracks: tracks ? tracks.join(",") : undefined }),
      apiFetch<RangeAnswer>(runPath(run, "/range"), { start, end, limit: 30 }),
    ]);
    const numeric = (value: number, text: string) => h("td", { class: "numeric", data: { value } }, text);
    const share = (part: number) => (area.duration_ns > 0 ? `${((100 * part) / area.duration_ns).toFixed(1)}%` : "");
    const trackRows = area.tracks.map((row) =>
      h(
        "tr",
        { data: { track: row.track } },
        h("td", { class: "name", title: row.name }, row.name),
        numeric(row.slice_count, String(row.slice_count)),
        numeric(row.busy_ns, formatDuration(row.busy_ns)),
        h("td", { class: "numeric" }, share(row.busy_ns)),
      ),
    );
    const nameRows = area.names.map((row) =>
      h(
        "tr",
        {},
        h("td", { class: "name", title: row.name }, row.name),
        numeric(row.count, String(row.count)),
        numeric(row.wall_ns, formatDuration(row.wall_ns)),
        numeric(row.self_ns, formatDuration(row.self_ns)),
        numeric(row.average_ns, formatDuration(row.average_ns)),
      ),
    );
    const rangeRows = range.names.map((row) =>
      h(
        "tr",
        {},
        h("td", { class: "name", title: row.name }, row.name),
        numeric(row.count, String(row.count)),
        numeric(row.total_ns, formatDuration(row.total_ns)),
        h("td", { class: "numeric" }, formatDuration(row.p50_ns)),
        h("td", { class: "numeric" }, formatDuration(row.max_ns)),
      ),
    );
    const header = (...names: string[]) => h("thead", {}, h("tr", {}, ...names.map((name, index) => h("th", index ? { class: "numeric" } : {}, name))));
    const trackWord = tracks ? `${area.track_count} track${area.track_count === 1 ? "" : "s"}` : `all ${area.track_count} tracks`;
    details.replaceChildren(
      h("h2", { id: "range-title" }, "Area"),
      h(
        "p",
        { id: "range-duration", data: { value: range.duration_ns, tracks: tracks ? tracks.join(",") : "all" } },
        `${formatDuration(range.duration_ns)} on ${trackWord}: ${area.slice_count} slices touch it (their parts inside count), ${area.name_count} names`,
      ),
      h("h3", {}, "per track"),
      h("table", { class: "data area", id: "area-tracks" }, header("track", "slices", "busy", "share"), h("tbody", {}, ...trackRows)),
      h("h3", {}, "per name"),
      h("table", { class: "data area", id: "area-names" }, header("name", "count", "wall", "self", "avg"), h("tbody", {}, ...nameRows)),
      area.name_count > area.names.length ? h("p", { class: "hint" }, `the ${area.names.length} longest of ${area.name_count} names`) : "",
      h("h3", {}, "wholly inside the range, every track"),
      h("p", { class: "hint", id: "range-counts" }, `${range.slice_count} slices, ${range.name_count} names`),
      h("table", { class: "data area", id: "range-table" }, header("name", "count", "total", "p50", "max"), h("tbody", {}, ...rangeRows)),
    );
  }

  async function focusSlice(target: SliceSummary): Promise<void> {
    view.show(target.ts, target.ts + target.dur);
    await showSlice(target.row);
  }

  // The search: `total` matches (exact), of which the page [pageOffset, pageOffset +
  // page.length) is held; `current` is the global index of the current match (-1: none).
  let total = 0;
  let page: SliceSummary[] = [];
  let pageOffset = 0;
  let current = -1;
  let searched = "";
  async function loadPage(text: string, offset: number): Promise<void> {
    const answer = await apiFetch<SearchAnswer>(runPath(run, "/search"), { q: text, limit: SEARCH_PAGE, offset });
    total = answer.total;
    page = answer.matches;
    pageOffset = answer.offset;
    view.highlight(page.map((match) => match.row));
  }
  // Finds the spans matching the search box and highlights them (the page held). `restore`:
  // a link's current match; `jump`: show the current match (the first when none was
  // restored), as a search typed here does; a link with a window keeps its window.
  async function search(restore: number | null, jump: boolean): Promise<void> {
    const text = searchBox.value.trim();
    url.search = text;
    url.match = null;
    updateUrl();
    searched = text;
    total = 0;
    page = [];
    current = -1;
    delete searchStatus.dataset.match;
    if (!text) {
      view.highlight([]);
      searchStatus.textContent = "";
      searchStatus.dataset.total = "0";
      return;
    }
    try {
      await loadPage(text, restore !== null ? Math.floor(restore / SEARCH_PAGE) * SEARCH_PAGE : 0);
    } catch (error) {
      view.highlight([]);
      searchStatus.textContent = error instanceof Error ? error.message : String(error);
      return;
    }
    if (total > 0 && restore !== null && restore >= total) await loadPage(text, Math.floor((total - 1) / SEARCH_PAGE) * SEARCH_PAGE);
    searchStatus.dataset.total = String(total);
    searchStatus.textContent = `${total} matches`;
    if (!total) return;
    if (restore !== null) {
      current = Math.min(restore, total - 1);
      url.match = current;
      showPosition();
      if (jump) await focusSlice(await matchAt(current));
    } else if (jump) await step(1);
  }
  // The match at a global index, fetching its page when another is held.
  async function matchAt(index: number): Promise<SliceSummary> {
    if (index < pageOffset || index >= pageOffset + page.length) await loadPage(searched, Math.floor(index / SEARCH_PAGE) * SEARCH_PAGE);
    return page[index - pageOffset];
  }
  function showPosition(): void {
    searchStatus.textContent = `${current + 1} of ${total}`;
    searchStatus.dataset.match = String(current);
  }
  async function step(direction: number): Promise<void> {
    if (!total) return;
    current = (current + direction + total) % total;
    url.match = current;
    showPosition();
    await focusSlice(await matchAt(current));
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
    view.setRange(initial.range, initial.area);
    await showRange(initial.range[0], initial.range[1], initial.area);
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
