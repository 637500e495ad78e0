// The Traces page: a run's traces (a run holds many: every root span that joined no trace
// is a trace of its own, a served request is in its caller's trace; docs/export.md), a
// page of them at a time from /api/runs/RUN/traces, sorted by the server (click a column's
// header; again for the other direction), filtered by the root span's name. A trace opens
// on the timeline (traceTimelineHref): its root selected, the window on the trace's time
// range and its spans highlighted by the timeline's own `trace:ID` search, all through the
// timeline's URL state, so the link is shareable and nothing of the search is redone here.
// The page's sort, order, filter and offset are in its URL.

import { apiFetch, runPath, type TimelineLayout, type TraceRow, type TracesAnswer } from "../api";
import { h } from "../dom";
import { formatCount, formatDuration } from "../format";
import { routeHref } from "../router";
import { windowWithMargin } from "../timeline/viewport";
import { defaultUrlState, encodeUrlState } from "../timeline/url_state";
import { runTabs } from "./overview";

// Traces fetched at a time.
export const TRACES_PAGE = 50;

type TraceSort = TracesAnswer["sort"];

// The columns: title, the server's sort (none: not sortable), numeric.
const COLUMNS: { title: string; sort?: TraceSort; numeric?: boolean }[] = [
  { title: "root span", sort: "name" },
  { title: "start", sort: "start", numeric: true },
  { title: "duration", sort: "duration", numeric: true },
  { title: "spans", sort: "spans", numeric: true },
  { title: "errors", sort: "errors", numeric: true },
  { title: "process" },
  { title: "trace id" },
];

// The sorts the server knows, and the direction it takes when none is asked.
const DEFAULT_DESCENDING: Record<TraceSort, boolean> = { duration: true, start: false, spans: true, errors: true, name: false };

export interface TracesPageState {
  sort: TraceSort;
  descending: boolean;
  filter: string;
  offset: number;
}

export function decodeTracesState(query: Record<string, string>): TracesPageState {
  // Own keys only: "toString" or "constructor" in the URL is no sort.
  const sort = (Object.hasOwn(DEFAULT_DESCENDING, query.sort ?? "") ? query.sort : "duration") as TraceSort;
  const descending = query.order === "asc" ? false : query.order === "desc" ? true : DEFAULT_DESCENDING[sort];
  const offset = Math.max(0, Math.floor(Number(query.offset ?? 0)) || 0);
  return { sort, descending, filter: query.q ?? "", offset };
}

export function encodeTracesState(state: TracesPageState): Record<string, string> {
  const query: Record<string, string> = {};
  if (state.sort !== "duration") query.sort = state.sort;
  if (state.descending !== DEFAULT_DESCENDING[state.sort]) query.order = state.descending ? "desc" : "asc";
  if (state.filter) query.q = state.filter;
  if (state.offset > 0) query.offset = String(state.offset);
  return query;
}

// The timeline's link that opens a trace: the window on its time range (with the margin a
// slice found is shown with), its root selected, `trace:ID` searched (its spans
// highlighted; with a window, the search does not move it).
export function traceTimelineHref(run: string, trace: Pick<TraceRow, "trace_id" | "root_row" | "start_ns" | "end_ns">): string {
  const state = defaultUrlState();
  state.window = windowWithMargin(trace.start_ns, trace.end_ns);
  state.slice = trace.root_row;
  state.search = `trace:${trace.trace_id}`;
  return routeHref({ page: "timeline", run, query: encodeUrlState(state) });
}

export async function tracesPage(root: HTMLElement, run: string, query: Record<string, string>): Promise<void> {
  const state = decodeTracesState(query);
  const filter = h("input", { type: "search", id: "traces-filter", placeholder: "filter by root span name", value: state.filter });
  const status = h("span", { id: "traces-status", class: "hint" });
  const previous = h("button", { id: "traces-previous" }, "◀ previous");
  const next = h("button", { id: "traces-next" }, "next ▶");
  const listing = h("div", { id: "traces-listing" });
  const layout = await apiFetch<TimelineLayout>(runPath(run, "/timeline"));
  const startOfRun = layout.start_ns;
  root.replaceChildren(
    h("h1", {}, layout.label),
    runTabs(run, "traces"),
    h("div", { class: "toolbar" }, filter, previous, next, status),
    h(
      "p",
      { class: "hint" },
      "A run holds many traces: every root span that joined no trace is a trace of its own, a request served with a traceparent is in its caller's trace. Click a trace to open it on the timeline (its root selected, its spans highlighted).",
    ),
    listing,
  );

  // Each load is numbered: an answer that arrives after a newer load began is dropped, so
  // the table never shows an older request's rows.
  let generation = 0;
  async function load(): Promise<void> {
    const mine = ++generation;
    history.replaceState(null, "", routeHref({ page: "traces", run, query: encodeTracesState(state) }));
    const answer = await apiFetch<TracesAnswer>(runPath(run, "/traces"), {
      sort: state.sort,
      order: state.descending ? "desc" : "asc",
      q: state.filter || undefined,
      limit: TRACES_PAGE,
      offset: state.offset,
    });
    if (mine !== generation) return;
    show(answer);
  }

  function show(answer: TracesAnswer): void {
    const first = answer.traces.length ? answer.offset + 1 : 0;
    const end = answer.offset + answer.traces.length;
    // An offset past the end (a link edited by hand) shows "0–0 of N", not "0–offset of N".
    const last = answer.traces.length ? end : 0;
    status.textContent = `${formatCount(first)}–${formatCount(last)} of ${formatCount(answer.matched)} traces${answer.q ? ` whose root contains “${answer.q}”` : ""} (${formatCount(answer.total)} in the run)`;
    status.dataset.total = String(answer.total);
    status.dataset.matched = String(answer.matched);
    status.dataset.offset = String(answer.offset);
    previous.disabled = answer.offset === 0;
    next.disabled = end >= answer.matched;
    const header = h(
      "tr",
      {},
      ...COLUMNS.map((column) => {
        const sorted = column.sort === answer.sort;
        const arrow = sorted ? (answer.order === "desc" ? " ▼" : " ▲") : "";
        return h(
          "th",
          {
            class: [column.numeric ? "numeric" : "", column.sort ? "sortable" : ""].join(" ").trim(),
            data: column.sort ? { sort: column.sort } : undefined,
            on: column.sort
              ? {
                  click: () => {
                    const sort = column.sort!;
                    state.descending = sort === state.sort ? !state.descending : DEFAULT_DESCENDING[sort];
                    state.sort = sort;
                    state.offset = 0;
                    void load();
                  },
                }
              : undefined,
          },
          column.title + arrow,
        );
      }),
    );
    const numeric = (value: number, text: string) => h("td", { class: "numeric", data: { value } }, text);
    const rows = answer.traces.map((trace) => {
      const href = traceTimelineHref(run, trace);
      return h(
        "tr",
        { class: trace.error_count > 0 ? "clickable with-errors" : "clickable", data: { traceId: trace.trace_id, row: trace.root_row }, on: { click: () => (location.hash = href) } },
        h("td", { class: "name", title: trace.root_name }, h("a", { href, class: "trace-link", on: { click: (event) => event.stopPropagation() } }, trace.root_name), trace.root_count > 1 ? h("small", {}, ` +${trace.root_count - 1} joined`) : ""),
        numeric(trace.start_ns, formatDuration(trace.start_ns - startOfRun)),
        numeric(trace.duration_ns, formatDuration(trace.duration_ns)),
        numeric(trace.span_count, formatCount(trace.span_count)),
        numeric(trace.error_count, trace.error_count ? formatCount(trace.error_count) : ""),
        h("td", { title: `pid ${trace.pid}` }, trace.process ? `${trace.process} (${trace.pid})` : `pid ${trace.pid}`, trace.process_count > 1 ? h("small", {}, ` +${trace.process_count - 1}`) : ""),
        h("td", { class: "trace-id", title: trace.remote_parent_span_id ? `joined the caller's span ${trace.remote_parent_span_id}` : "begun in this run" }, trace.trace_id),
      );
    });
    listing.replaceChildren(
      answer.traces.length
        ? h("table", { class: "data traces", id: "traces-table" }, h("thead", {}, header), h("tbody", {}, ...rows))
        : h("p", { class: "hint", id: "traces-none" }, answer.total ? "No trace's root span contains that text." : "This run has no spans."),
    );
    listing.dataset.sort = answer.sort;
    listing.dataset.order = answer.order;
    listing.dataset.offset = String(answer.offset);
    listing.dataset.q = answer.q;
  }

  const applyFilter = () => {
    if (filter.value === state.filter) return;
    state.filter = filter.value;
    state.offset = 0;
    void load();
  };
  filter.addEventListener("change", applyFilter);
  filter.addEventListener("keyup", (event) => {
    if (event.key === "Enter") applyFilter();
  });
  previous.addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - TRACES_PAGE);
    void load();
  });
  next.addEventListener("click", () => {
    state.offset += TRACES_PAGE;
    void load();
  });
  await load();
}
