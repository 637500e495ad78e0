// The app's pages by URL (hash routing, so `opsight ui` serves one index.html and every
// page can be linked to). ROUTES is the one table of them: each page's path pattern, whose
// ":name" segments are the route's parameters (":name?" one that may be left out). Both
// directions read it: parseRoute (URL to page and parameters, what main.ts renders) and
// routeHref (page and parameters to URL, every link of the app). Each route takes optional
// ?key=value parameters too (a timeline's window and selected slice, an overview's span).
// Adding a page: a line here, its renderer in main.ts's PAGES (the compiler asks for it),
// its module in pages/, and its section in docs/ui.md (docs/architecture.md, "Add a UI page").

export const ROUTES = {
  runs: "runs", // also the empty path: the app's home
  overview: "runs/:run",
  timeline: "runs/:run/timeline",
  traces: "runs/:run/traces", // the run's traces (sort=, order=, q=, offset=)
  tree: "runs/:run/tree",
  details: "runs/:run/details",
  compare: "compare/:a/:b",
  explain: "explain", // the runs of `opsight explain` over time
  llm: "llm/:run?", // the sweeps of `opsight bench --generate`; :run is a sweep's id
} as const;

export type RoutedPage = keyof typeof ROUTES;
export type Page = RoutedPage | "not-found";

// The parameters any pattern names (the run reference of run pages; compare's two runs).
export type ParamName = "run" | "a" | "b";

export type Route = { page: Page; query: Record<string, string> } & Partial<Record<ParamName, string>>;

interface Segment {
  literal?: string;
  param?: ParamName;
  optional?: boolean;
}

function segmentsOf(pattern: string): Segment[] {
  return pattern.split("/").map((part) => {
    if (!part.startsWith(":")) return { literal: part };
    const optional = part.endsWith("?");
    return { param: (optional ? part.slice(1, -1) : part.slice(1)) as ParamName, optional };
  });
}

const COMPILED = (Object.entries(ROUTES) as [RoutedPage, string][]).map(([page, pattern]) => ({ page, segments: segmentsOf(pattern) }));

// The route's parameters if `parts` (the URL's decoded path segments) match `segments`.
function match(segments: Segment[], parts: string[]): Partial<Record<ParamName, string>> | null {
  const required = segments.filter((segment) => !segment.optional).length;
  if (parts.length < required || parts.length > segments.length) return null;
  const params: Partial<Record<ParamName, string>> = {};
  for (let index = 0; index < parts.length; index += 1) {
    const segment = segments[index];
    if (segment.literal !== undefined) {
      if (segment.literal !== parts[index]) return null;
    } else params[segment.param!] = parts[index];
  }
  return params;
}

export function parseRoute(hash: string): Route {
  const text = hash.startsWith("#") ? hash.slice(1) : hash;
  const [pathPart, queryPart = ""] = text.split("?", 2);
  const query: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(queryPart)) query[key] = value;
  const parts = pathPart.split("/").filter((segment) => segment !== "").map(decodeSegment);
  if (parts.length === 0) return { page: "runs", query };
  for (const { page, segments } of COMPILED) {
    const params = match(segments, parts);
    if (params) return { page, ...params, query };
  }
  return { page: "not-found", query };
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

// The URL of a page: its pattern with the parameters filled in (an optional one left out
// when not given), then the query's non-empty values. "not-found" links to the runs page.
export function routeHref(
  route: { page: Page; query?: Record<string, string | number | undefined> } & Partial<Record<ParamName, string>>,
): string {
  const segments = route.page === "not-found" ? segmentsOf(ROUTES.runs) : segmentsOf(ROUTES[route.page]);
  const parts: string[] = [];
  for (const segment of segments) {
    if (segment.literal !== undefined) parts.push(segment.literal);
    else {
      const value = route[segment.param!];
      if (segment.optional && !value) break;
      parts.push(encodeURIComponent(value ?? ""));
    }
  }
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(route.query ?? {}))
    if (value !== undefined && value !== "") params.set(key, String(value));
  const search = params.toString();
  const path = `#/${parts.join("/")}`;
  return search ? `${path}?${search}` : path;
}
