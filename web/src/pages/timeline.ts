// The timeline page: the canvas (timeline/timeline_view.ts), a search by name with next
// and previous, and the details of the selected slice (args, self time, parent chain,
// flows), or of a range marked with shift+drag (per-name statistics of the slices inside
// it), or of an instant clicked; switches for the flows' arrows, the instants' markers and
// the critical path's outlines. The window, the selection and the critical path switch are
// in the URL (?start=&end=&slice=&critical=1), so a link shows the same to someone else.

import { apiFetch, runPath, type CriticalPathSlices, type GpuLaunch, type MarksAnswer, type SliceDetail, type SliceSummary, type TileAnswer, type TimelineLayout } from "../api";
import { h } from "../dom";
import { formatDuration } from "../format";
import { routeHref } from "../router";
import { TimelineView, type CounterTile, type InstantHit } from "../timeline/timeline_view";
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
  const flowsBox = h("input", { type: "checkbox", id: "show-flows", checked: query.flows !== "0" });
  const instantsBox = h("input", { type: "checkbox", id: "show-instants", checked: query.instants !== "0" });
  const criticalBox = h("input", { type: "checkbox", id: "show-critical", checked: query.critical === "1" });
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
      h("label", { title: `${layout.flow_count ?? 0} flows in the run` }, flowsBox, " flows"),
      h("label", { title: `${layout.instant_count ?? 0} instants in the run` }, instantsBox, " instants"),
      h("label", { title: "outline the spans on the critical path (opsight report --critical-path)" }, criticalBox, " critical path"),
      criticalStatus,
      h("span", { class: "hint" }, "W/S zoom, A/D pan, wheel zoom, drag pan, shift+drag measures"),
    ),
    h("div", { class: "timeline-page" }, holder, details),
  );

  let state = { ...query };
  const updateUrl = () => history.replaceState(null, "", routeHref({ page: "timeline", run, query: state }));
  const window0: [number, number] | undefined =
    query.start && query.end ? [Number(query.start), Number(query.end)] : undefined;
  const sources = {
    tiles: (track: number, start: number, end: number, resolution: number) =>
      apiFetch<TileAnswer>(runPath(run, "/tiles"), { track, start: Math.floor(start), end: Math.ceil(end), resolution }),
    counters: (track: number, start: number, end: number, resolution: number) =>
      apiFetch<CounterTile>(runPath(run, "/counters"), { track, start: Math.floor(start), end: Math.ceil(end), resolution }),
    marks: (start: number, end: number) => apiFetch<MarksAnswer>(runPath(run, "/marks"), { start: Math.floor(start), end: Math.ceil(end) }),
  };
  let urlTimer = 0;
  const view = new TimelineView(
    layout,
    sources,
    {
      onSelect: (row) => void showSlice(row),
      onRange: (start, end) => void showRange(start, end),
      onInstant: (instant) => showInstant(instant),
      onWindowChange: (start, end) => {
        state = { ...state, start: String(start), end: String(end) };
        window.clearTimeout(urlTimer);
        urlTimer = window.setTimeout(updateUrl, 200);
      },
    },
    Math.max(600, holder.clientWidth || root.clientWidth - 340),
    window0,
  );
  holder.appendChild(view.canvas);
  window.opsightTimeline = view;
  const resize = new ResizeObserver(() => view.resize(Math.max(600, holder.clientWidth)));
  resize.observe(holder);

  async function showSlice(row: number): Promise<void> {
    const slice = await apiFetch<SliceDetail>(runPath(run, `/slices/${row}`));
    view.select(row);
    state = { ...state, slice: String(row) };
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

  const setSwitch = (key: string, on: boolean, offValue: string | undefined, onValue: string | undefined) => {
    state = { ...state, [key]: (on ? onValue : offValue) as string };
    if (state[key] === undefined) delete state[key];
    updateUrl();
  };
  flowsBox.addEventListener("change", () => {
    view.showFlows = flowsBox.checked;
    view.requestFrame();
    setSwitch("flows", flowsBox.checked, "0", undefined);
  });
  instantsBox.addEventListener("change", () => {
    view.showInstants = instantsBox.checked;
    view.requestFrame();
    setSwitch("instants", instantsBox.checked, "0", undefined);
  });
  view.showFlows = flowsBox.checked;
  view.showInstants = instantsBox.checked;
  let critical: CriticalPathSlices | null = null;
  async function showCritical(on: boolean): Promise<void> {
    setSwitch("critical", on, undefined, "1");
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
  async function search(): Promise<void> {
    const text = searchBox.value.trim();
    state = { ...state, q: text };
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
    if (matches.length) await step(1);
  }
  async function step(direction: number): Promise<void> {
    if (!matches.length) return;
    current = (current + direction + matches.length) % matches.length;
    searchStatus.textContent = `${current + 1} of ${matches.length}`;
    await focusSlice(matches[current]);
  }
  searchBox.addEventListener("keyup", (event) => {
    if (event.key === "Enter") void search();
  });
  next.addEventListener("click", () => void step(1));
  previous.addEventListener("click", () => void step(-1));
  if (query.slice) await showSlice(Number(query.slice));
  if (criticalBox.checked) await showCritical(true);
  if (query.q) await search();
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
