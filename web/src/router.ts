// The app's pages by URL (hash routing, so `opsight ui` serves one index.html and every
// page can be linked to): #/runs, #/runs/REF, #/runs/REF/timeline, #/runs/REF/tree,
// #/runs/REF/details,
// #/compare/A/B, #/explain (the runs of `opsight explain` over time), #/llm and #/llm/SWEEP
// (the sweeps of `opsight bench --generate`), each with optional ?key=value parameters (a timeline's window and the
// selected slice, an overview's selected span name).

export type Page = "runs" | "overview" | "timeline" | "tree" | "details" | "compare" | "explain" | "llm" | "not-found";

export interface Route {
  page: Page;
  run?: string; // the run reference of run pages (the sweep's id on the llm page)
  a?: string; // compare
  b?: string;
  query: Record<string, string>;
}

export function parseRoute(hash: string): Route {
  const text = hash.startsWith("#") ? hash.slice(1) : hash;
  const [pathPart, queryPart = ""] = text.split("?", 2);
  const query: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(queryPart)) query[key] = value;
  const segments = pathPart.split("/").filter((segment) => segment !== "").map(decodeSegment);
  if (segments.length === 0 || (segments.length === 1 && segments[0] === "runs"))
    return { page: "runs", query };
  if (segments[0] === "runs" && segments.length === 2) return { page: "overview", run: segments[1], query };
  if (segments[0] === "runs" && segments.length === 3 && (segments[2] === "timeline" || segments[2] === "tree" || segments[2] === "details"))
    return { page: segments[2], run: segments[1], query };
  if (segments[0] === "explain" && segments.length === 1) return { page: "explain", query };
  if (segments[0] === "llm" && segments.length <= 2) return { page: "llm", run: segments[1], query };
  if (segments[0] === "compare" && segments.length === 3)
    return { page: "compare", a: segments[1], b: segments[2], query };
  return { page: "not-found", query };
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export function routeHref(route: Omit<Route, "query"> & { query?: Record<string, string | number | undefined> }): string {
  const encode = encodeURIComponent;
  let path = "#/runs";
  if (route.page === "overview") path = `#/runs/${encode(route.run ?? "")}`;
  if (route.page === "timeline" || route.page === "tree" || route.page === "details") path = `#/runs/${encode(route.run ?? "")}/${route.page}`;
  if (route.page === "explain") path = "#/explain";
  if (route.page === "llm") path = route.run ? `#/llm/${encode(route.run)}` : "#/llm";
  if (route.page === "compare") path = `#/compare/${encode(route.a ?? "")}/${encode(route.b ?? "")}`;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(route.query ?? {}))
    if (value !== undefined && value !== "") params.set(key, String(value));
  const search = params.toString();
  return search ? `${path}?${search}` : path;
}
