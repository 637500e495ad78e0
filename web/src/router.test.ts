import { expect, test } from "vitest";
import { parseRoute, routeHref } from "./router";

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
