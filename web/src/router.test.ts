import { expect, test } from "vitest";
import { parseRoute, routeHref, ROUTES, type Route, type RoutedPage } from "./router";

test("every page has a URL", () => {
  expect(parseRoute("")).toEqual({ page: "runs", query: {} });
  expect(parseRoute("#/runs?q=bert")).toEqual({ page: "runs", query: { q: "bert" } });
  expect(parseRoute("#/runs/12")).toEqual({ page: "overview", run: "12", query: {} });
  expect(parseRoute("#/runs/file%3A0/timeline?start=5&end=9&slice=3")).toEqual({
    page: "timeline",
    run: "file:0",
    query: { start: "5", end: "9", slice: "3" },
  });
  expect(parseRoute("#/runs/latest/tree").page).toBe("tree");
  expect(parseRoute("#/runs/3/details?span=infer")).toEqual({ page: "details", run: "3", query: { span: "infer" } });
  expect(parseRoute("#/compare/1/latest")).toEqual({ page: "compare", a: "1", b: "latest", query: {} });
  expect(parseRoute("#/nowhere").page).toBe("not-found");
  expect(parseRoute("#/runs/%E0%A4%A").run).toBe("%E0%A4%A"); // malformed escapes stay as typed
});

test("hrefs and routes round-trip", () => {
  const href = routeHref({ page: "timeline", run: "my run/1", query: { start: 5, end: undefined, q: "a&b" } });
  expect(href).toBe("#/runs/my%20run%2F1/timeline?start=5&q=a%26b");
  expect(parseRoute(href)).toEqual({ page: "timeline", run: "my run/1", query: { start: "5", q: "a&b" } });
  expect(routeHref({ page: "compare", a: "1", b: "2" })).toBe("#/compare/1/2");
});

test("the explain page has its own route", () => {
  expect(parseRoute("#/explain")).toEqual({ page: "explain", query: {} });
  expect(routeHref({ page: "explain" })).toBe("#/explain");
});

// One example URL per page of ROUTES, with its parameters: parsed, and made back.
const EXAMPLES: { href: string; route: Omit<Route, "query"> }[] = [
  { href: "#/runs", route: { page: "runs" } },
  { href: "#/runs/7", route: { page: "overview", run: "7" } },
  { href: "#/runs/7/timeline", route: { page: "timeline", run: "7" } },
  { href: "#/runs/7/traces", route: { page: "traces", run: "7" } },
  { href: "#/runs/latest/tree", route: { page: "tree", run: "latest" } },
  { href: "#/runs/file%3A2/details", route: { page: "details", run: "file:2" } },
  { href: "#/compare/1/latest", route: { page: "compare", a: "1", b: "latest" } },
  { href: "#/explain", route: { page: "explain" } },
  { href: "#/llm", route: { page: "llm" } },
  { href: "#/llm/3f2a9c", route: { page: "llm", run: "3f2a9c" } },
];

test("every route of the table parses and is made back, with and without a query", () => {
  const covered = new Set(EXAMPLES.map((example) => example.route.page));
  expect([...covered].sort()).toEqual((Object.keys(ROUTES) as RoutedPage[]).sort());
  for (const { href, route } of EXAMPLES) {
    expect(parseRoute(href), href).toEqual({ ...route, query: {} });
    expect(routeHref(route), href).toBe(href);
    const withQuery = `${href}?x=1&y=a%20b`;
    expect(parseRoute(withQuery), withQuery).toEqual({ ...route, query: { x: "1", y: "a b" } });
    expect(routeHref({ ...route, query: { x: 1, y: "a b", empty: "" } })).toBe(`${href}?x=1&y=a+b`);
  }
});

test("a path that fits no pattern is not found", () => {
  for (const href of ["#/runs/1/nowhere", "#/runs/1/timeline/2", "#/compare/1", "#/compare/1/2/3", "#/explain/1", "#/llm/a/b", "#/tree"])
    expect(parseRoute(href).page, href).toBe("not-found");
  expect(routeHref({ page: "not-found" })).toBe("#/runs");
});

test("trailing and doubled slashes and an empty path lead where they should", () => {
  expect(parseRoute("#/")).toEqual({ page: "runs", query: {} });
  expect(parseRoute("#?q=x")).toEqual({ page: "runs", query: { q: "x" } });
  expect(parseRoute("#/runs/5/")).toEqual({ page: "overview", run: "5", query: {} });
  expect(parseRoute("#//compare//1//2")).toEqual({ page: "compare", a: "1", b: "2", query: {} });
});
