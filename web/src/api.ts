// The server's REST API (docs/ui-openapi.json). When `opsight ui` listens on a
// non-loopback address it prints a URL with ?token=...: the token is kept for the tab
// (sessionStorage), taken out of the address bar, and sent with every call.

import type { components } from "./api_types";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = "opsight-token";

export function accessToken(): string | null {
  const search = new URLSearchParams(window.location.search);
  const fromUrl = search.get("token");
  if (fromUrl) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    // Out of the address bar, so it is not in the history, a screenshot or a shared link.
    search.delete("token");
    const query = search.toString();
    history.replaceState(history.state, "", `${window.location.pathname}${query ? `?${query}` : ""}${window.location.hash}`);
    return fromUrl;
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

export function apiUrl(path: string, params: Record<string, string | number | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value));
  const query = search.toString();
  return `api/${path}${query ? `?${query}` : ""}`;
}

export async function apiFetch<T>(
  path: string,
  params: Record<string, string | number | undefined> = {},
  method = "GET",
): Promise<T> {
  const headers: Record<string, string> = {};
  const token = accessToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(apiUrl(path, params), { method, headers });
  const text = await response.text();
  if (!response.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: string }).error ?? text;
    } catch {
      /* not JSON: show it as it came */
    }
    throw new ApiError(response.status, message);
  }
  return JSON.parse(text) as T;
}

export function runPath(run: string, rest = ""): string {
  return `runs/${encodeURIComponent(run)}${rest}`;
}

// ---- What the API answers (the subset the pages read) -----------------------------------

// Generated from docs/ui-openapi.json's schemas (api_types.ts, `npm run gen-types`).
type Schemas = components["schemas"];
export type RunEntry = Schemas["RunEntry"];
export type RunsAnswer = Schemas["RunsAnswer"];
export type RunDetail = Schemas["RunDetail"];
export type Statistics = Schemas["Statistics"];
export type SummaryRow = Schemas["SummaryRow"];
export type TreeNode = Schemas["TreeNode"];
export type MergedTree = Schemas["MergedTree"];

export interface CompareRow {
  name: string;
  depth?: number;
  parent?: number | null;
  a: Statistics | null;
  b: Statistics | null;
  median_ratio: number;
  total_delta_ns: number;
  adjusted_p_value: number | null;
  verdict: string;
}

export interface Comparison {
  a: { label: string; slices: number; overhead_ns: number; events_dropped: number };
  b: { label: string; slices: number; overhead_ns: number; events_dropped: number };
  names: CompareRow[];
  tree: CompareRow[];
}

export type TimelineTrack = Schemas["TimelineTrack"];
export type CounterTrack = Schemas["CounterTrack"];
export type TimelineLayout = Schemas["TimelineLayout"];
// [start_ns, dur_ns, count, row, name index]
export type TileItem = Schemas["TileItem"];
export type TileAnswer = Schemas["TileAnswer"];
// /traces: a run's traces, a page of them (pages/traces.ts).
export type TraceRow = Schemas["TraceRow"];
export type TracesAnswer = Schemas["TracesAnswer"];

export interface SliceSummary {
  row: number;
  name: string;
  ts: number;
  dur: number;
  track: number;
  depth: number;
}

export interface SliceDetail extends SliceSummary {
  category: string;
  track_label: string;
  pid: number;
  tid: number;
  span_id: string;
  // The trace the span is exported in (a root's own, or the one it or an ancestor joined or
  // began) and its parent span (the remote one for a joined span; null: begins its trace).
  trace_id: string;
  parent_span_id: string | null;
  self_ns: number;
  args: Record<string, unknown>;
  parents: SliceSummary[];
  flows_in: SliceSummary[];
  flows_out: SliceSummary[];
  // GPU work only: the call that launched it and the code open there (docs/gpu.md).
  launched_by?: GpuLaunch;
}

export interface GpuLaunch extends SliceSummary {
  operator: string;
  module: string;
  python: string;
  source: string;
}

// /marks: flows and instants of a time window.
// instants: [ts, name index, track, scope, pid]
export type InstantItem = [number, number, number, "thread" | "process" | "global", number];
// flows: [from row, from ts, from track, from depth, to row, to ts, to track, to depth, name index]
export type FlowItem = [number, number, number, number, number, number, number, number, number];

export interface MarksAnswer {
  start: number;
  end: number;
  names: string[];
  instants: InstantItem[];
  instant_total: number;
  flows: FlowItem[];
  flow_total: number;
}

// /critical_path_slices: [row, ts, dur, track, depth, on path ns] per step.
export interface CriticalPathSlices {
  start_ns: number;
  end_ns: number;
  length_ns: number;
  idle_ns: number;
  roots: number[];
  step_count: number;
  steps: [number, number, number, number, number, number][];
}

// /inferences: each single inference of a breakdown with its phases' times.
export interface InferencesAnswer {
  span: string;
  grouping: string;
  inference_count: number;
  phases: string[];
  inferences: { row: number; ts: number; dur: number; phases: number[] }[];
}

// opsight explain's results: defined once by the Python package (opsight.explain.result),
// described by docs/ui-openapi.json, generated into api_types.ts.
export type ExplainBreak = Schemas["ExplainBreak"];
export type ExplainModel = Schemas["ExplainModel"];
export type ExplainRun = Schemas["ExplainRun"];
export type ExplainAnswer = Schemas["ExplainAnswer"];
