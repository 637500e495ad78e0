// The opsight web UI: routes the URL's hash to a page and shows errors from the API as
// text on the page.

import "./style.css";
import { ApiError } from "./api";
import { h } from "./dom";
import { parseRoute, routeHref } from "./router";
import { comparePage } from "./pages/compare";
import { detailsPage } from "./pages/details";
import { explainPage } from "./pages/explain";
import { llmPage } from "./pages/llm";
import { overviewPage } from "./pages/overview";
import { runsPage } from "./pages/runs";
import { timelinePage } from "./pages/timeline";
import { treePage } from "./pages/tree";

const app = document.getElementById("app") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
nav.replaceChildren(h("a", { href: routeHref({ page: "runs" }) }, "Runs"), " ", h("a", { href: routeHref({ page: "explain" }), id: "nav-explain" }, "Explain runs"), " ", h("a", { href: routeHref({ page: "llm" }), id: "nav-llm" }, "LLM sweeps"));

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
    if (route.page === "runs") await runsPage(root, route.query);
    else if (route.page === "overview") await overviewPage(root, route.run!, route.query);
    else if (route.page === "timeline") await timelinePage(root, route.run!, route.query);
    else if (route.page === "tree") await treePage(root, route.run!, route.query);
    else if (route.page === "details") await detailsPage(root, route.run!, route.query);
    else if (route.page === "compare") await comparePage(root, route.a!, route.b!);
    else if (route.page === "explain") await explainPage(root);
    else if (route.page === "llm") await llmPage(root, route.run);
    else root.replaceChildren(h("h1", {}, "Not found"), h("p", {}, `No page at ${location.hash}`));
  } catch (failure) {
    if (mine !== generation) return;
    const message = failure instanceof ApiError ? `${failure.status}: ${failure.message}` : String(failure);
    root.replaceChildren(h("h1", {}, "Error"), h("p", { class: "error", id: "error" }, message));
  }
  if (mine === generation) document.body.dataset.ready = "true";
}

window.addEventListener("hashchange", () => void show());
void show();
