// The opsight web UI: routes the URL's hash to a page (router.ts's ROUTES, rendered by
// PAGES below) and shows errors from the API as text on the page.

import "./style.css";
import { ApiError } from "./api";
import { h } from "./dom";
import { parseRoute, routeHref, type Route, type RoutedPage } from "./router";
import { comparePage } from "./pages/compare";
import { detailsPage } from "./pages/details";
import { explainPage } from "./pages/explain";
import { llmPage } from "./pages/llm";
import { overviewPage } from "./pages/overview";
import { runsPage } from "./pages/runs";
import { timelinePage } from "./pages/timeline";
import { tracesPage } from "./pages/traces";
import { treePage } from "./pages/tree";

const app = document.getElementById("app") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
nav.replaceChildren(h("a", { href: routeHref({ page: "runs" }) }, "Runs"), " ", h("a", { href: routeHref({ page: "explain" }), id: "nav-explain" }, "Explain runs"), " ", h("a", { href: routeHref({ page: "llm" }), id: "nav-llm" }, "LLM sweeps"));

// Each routed page's renderer, given the page's root element and its route (parameters
// and query); the type makes every page of ROUTES have one.
const PAGES: Record<RoutedPage, (root: HTMLElement, route: Route) => Promise<void>> = {
  runs: (root, route) => runsPage(root, route.query),
  overview: (root, route) => overviewPage(root, route.run!, route.query),
  timeline: (root, route) => timelinePage(root, route.run!, route.query),
  traces: (root, route) => tracesPage(root, route.run!, route.query),
  tree: (root, route) => treePage(root, route.run!, route.query),
  details: (root, route) => detailsPage(root, route.run!, route.query),
  compare: (root, route) => comparePage(root, route.a!, route.b!),
  explain: (root) => explainPage(root),
  llm: (root, route) => llmPage(root, route.run),
};

let generation = 0;

async function show(): Promise<void> {
  const mine = ++generation;
  const route = parseRoute(location.hash);
  const root = h("div", { class: "page" });
  app.replaceChildren(root);
  root.appendChild(h("p", { class: "loading" }, "loading…"));
  document.body.dataset.page = route.page;
  delete document.body.dataset.ready;
  try {
    if (route.page === "not-found") root.replaceChildren(h("h1", {}, "Not found"), h("p", {}, `No page at ${location.hash}`));
    else await PAGES[route.page](root, route);
  } catch (failure) {
    if (mine !== generation) return;
    const message = failure instanceof ApiError ? `${failure.status}: ${failure.message}` : String(failure);
    root.replaceChildren(h("h1", {}, "Error"), h("p", { class: "error", id: "error" }, message));
  }
  if (mine === generation) document.body.dataset.ready = "true";
}

window.addEventListener("hashchange", () => void show());
void show();
