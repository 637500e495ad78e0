import { afterEach, expect, test, vi } from "vitest";
import type { TraceRow, TracesAnswer } from "../api";
import { parseRoute } from "../router";
import { decodeUrlState } from "../timeline/url_state";
import { decodeTracesState, encodeTracesState, traceTimelineHref, tracesPage } from "./traces";

test("the page's state is its URL: defaults left out, the sort's own direction by default", () => {
  expect(decodeTracesState({})).toEqual({ sort: "duration", descending: true, filter: "", offset: 0 });
  expect(decodeTracesState({ sort: "start" }).descending).toBe(false);
  expect(decodeTracesState({ sort: "fastest", offset: "-3" })).toEqual({ sort: "duration", descending: true, filter: "", offset: 0 });
  expect(decodeTracesState({ sort: "toString" })).toEqual({ sort: "duration", descending: true, filter: "", offset: 0 });
  expect(decodeTracesState({ sort: "constructor", order: "asc" }).sort).toBe("duration");
  const state = { sort: "spans" as const, descending: false, filter: "GET /", offset: 100 };
  expect(encodeTracesState(state)).toEqual({ sort: "spans", order: "asc", q: "GET /", offset: "100" });
  expect(decodeTracesState(encodeTracesState(state))).toEqual(state);
  expect(encodeTracesState(decodeTracesState({}))).toEqual({});
});

test("a trace opens on the timeline: its window with a margin, its root selected, trace:ID searched", () => {
  const href = traceTimelineHref("my run", { trace_id: "ab".repeat(16), root_row: 42, start_ns: 1_000_000, end_ns: 3_000_000 });
  const route = parseRoute(href);
  expect(route.page).toBe("timeline");
  expect(route.run).toBe("my run");
  const state = decodeUrlState(route.query);
  expect(state.slice).toBe(42);
  expect(state.search).toBe(`trace:${"ab".repeat(16)}`);
  expect(state.match).toBeNull(); // with a window, the search does not move it
  expect(state.window).toEqual([900_000, 3_100_000]); // 5% of 2 ms on each side
});

function traceRow(index: number): TraceRow {
  return {
    trace_id: index.toString(16).padStart(32, "0"),
    root_row: index,
    root_name: index === 0 ? "<img src=x onerror=alert(1)>" : `step ${index}`,
    root_ts: 1000 * index,
    root_dur: 500,
    track: 0,
    pid: 7,
    process: "python serve.py",
    start_ns: 1000 * index,
    end_ns: 1000 * index + 500,
    duration_ns: 500,
    span_count: 3,
    error_count: index % 2,
    root_count: 1,
    process_count: 1,
    remote_parent_span_id: null,
  };
}

function answer(params: URLSearchParams, traces: TraceRow[]): TracesAnswer {
  return {
    total: 120,
    matched: 120,
    offset: Number(params.get("offset") ?? 0),
    sort: (params.get("sort") ?? "duration") as TracesAnswer["sort"],
    order: (params.get("order") ?? "desc") as TracesAnswer["order"],
    q: params.get("q") ?? "",
    traces,
  };
}

afterEach(() => {
  vi.unstubAllGlobals();
});

test("the page lists a page of traces as text, sorts by a header's click and drops a stale answer", async () => {
  const asked: URLSearchParams[] = [];
  // The first /traces answer is held back until the second one has been shown.
  let releaseFirst: () => void = () => undefined;
  const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      const [path, query = ""] = url.split("?");
      const params = new URLSearchParams(query);
      let body: unknown;
      if (path.endsWith("/timeline")) body = { label: "run 1", start_ns: 0, end_ns: 200_000, processes: [] };
      else {
        asked.push(params);
        const number = asked.length;
        if (number === 2) await firstHeld; // the first sort's answer arrives last
        body = answer(params, number === 2 ? [traceRow(99)] : [traceRow(0), traceRow(1)]);
      }
      return new Response(JSON.stringify(body), { status: 200 });
    }),
  );
  const root = document.createElement("div");
  document.body.appendChild(root);
  await tracesPage(root, "1", {});
  expect(asked[0].get("sort")).toBe("duration");
  expect(asked[0].get("order")).toBe("desc");
  expect(asked[0].get("limit")).toBe("50");
  const rows = () => [...root.querySelectorAll("#traces-table tbody tr")] as HTMLElement[];
  expect(rows().map((row) => row.dataset.traceId)).toEqual([traceRow(0).trace_id, traceRow(1).trace_id]);
  // A span name that looks like HTML stays text.
  expect(rows()[0].querySelector("a.trace-link")?.textContent).toBe("<img src=x onerror=alert(1)>");
  expect(root.querySelector("img")).toBeNull();
  const link = rows()[1].querySelector("a.trace-link")?.getAttribute("href") ?? "";
  expect(decodeUrlState(parseRoute(link).query).search).toBe(`trace:${traceRow(1).trace_id}`);
  expect(root.querySelector("#traces-status")?.getAttribute("data-matched")).toBe("120");
  expect((root.querySelector("#traces-previous") as HTMLButtonElement).disabled).toBe(true);
  expect((root.querySelector("#traces-next") as HTMLButtonElement).disabled).toBe(false);

  // Sort by spans (held back), then by start before it answers: only start's rows show.
  (root.querySelector("th[data-sort=spans]") as HTMLElement).click();
  (root.querySelector("th[data-sort=start]") as HTMLElement).click();
  await vi.waitFor(() => expect(asked.length).toBe(3));
  await vi.waitFor(() => expect(root.querySelector("#traces-listing")?.getAttribute("data-sort")).toBe("start"));
  releaseFirst();
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(asked[1].get("sort")).toBe("spans");
  expect(asked[2].get("sort")).toBe("start");
  expect(asked[2].get("order")).toBe("asc"); // start's own direction
  expect(root.querySelector("#traces-listing")?.getAttribute("data-sort")).toBe("start");
  expect(rows().map((row) => row.dataset.traceId)).toEqual([traceRow(0).trace_id, traceRow(1).trace_id]);
  root.remove();
});
