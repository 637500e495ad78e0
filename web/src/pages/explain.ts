// The explain runs: the runs `opsight explain` saved in the store (tagged kind=explain,
// docs/explain.md) over time, oldest first: a chart of graph breaks and one of graphs per
// model across the runs, a table of each run's graphs and breaks per model, and each
// run's break reasons (reason, where, how often), newest run first.

import { apiFetch, type ExplainAnswer, type ExplainModel, type ExplainRun } from "../api";
import { drawSeriesChart, type Series } from "../charts";
import { h } from "../dom";
import { formatUnixTime } from "../format";
import { routeHref } from "../router";
import { colorOf } from "../timeline/layout";

// The models of the runs, in the order they first appear.
export function modelNames(runs: ExplainRun[]): string[] {
  const names: string[] = [];
  for (const run of runs) for (const model of run.models) if (!names.includes(modelName(model))) names.push(modelName(model));
  return names;
}

export function modelName(model: ExplainModel): string {
  return model.model ?? model.span;
}

// One series per model: its `field` in each run (null where the run lacks the model).
export function explainSeries(runs: ExplainRun[], field: "graph_breaks" | "graphs"): Series[] {
  return modelNames(runs).map((name) => ({
    name,
    color: colorOf(name),
    values: runs.map((run) => {
      const model = run.models.find((candidate) => modelName(candidate) === name);
      return model && typeof model[field] === "number" ? (model[field] as number) : null;
    }),
  }));
}

function runLabel(run: ExplainRun): string {
  const commit = run.tags?.commit ? ` ${run.tags.commit.slice(0, 10)}` : "";
  return `${formatUnixTime(run.created_unix_ns ?? 0)}${commit}`;
}

export async function explainPage(root: HTMLElement): Promise<void> {
  const answer = await apiFetch<ExplainAnswer>("explain");
  const runs = answer.runs;
  if (!runs.length) {
    root.replaceChildren(
      h("h1", {}, "Explain runs"),
      h("p", { class: "hint", id: "explain-empty" }, answer.store_problem || "No run of opsight explain in the store yet (runs tagged kind=explain): opsight explain MODELS saves one."),
    );
    return;
  }
  const models = modelNames(runs);
  const labels = runs.map(runLabel);
  const legend = h("p", { class: "legend" }, ...models.map((name) => h("span", {}, h("i", { style: { background: colorOf(name) } }), ` ${name} `)));
  const breaksChart = h("canvas", { id: "explain-breaks-chart" });
  const graphsChart = h("canvas", { id: "explain-graphs-chart" });

  const table = h("table", { class: "data", id: "explain-table" });
  table.appendChild(
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "run"), h("th", {}, "created (UTC)"), h("th", {}, "commit"), ...models.map((name) => h("th", { class: "numeric" }, `${name}: graphs / breaks`))),
    ),
  );
  const body = h("tbody");
  for (const run of runs) {
    const cells = models.map((name) => {
      const model = run.models.find((candidate) => modelName(candidate) === name);
      if (!model) return h("td", { class: "numeric" }, "");
      const text = model.status === "ok" ? `${model.graphs ?? "?"} / ${model.graph_breaks ?? "?"}` : `${model.status ?? "?"}`;
      return h("td", { class: "numeric", data: { model: name, graphs: model.graphs ?? "", breaks: model.graph_breaks ?? "" }, title: model.error ?? "" }, text);
    });
    body.appendChild(
      h(
        "tr",
        { data: { ref: run.ref } },
        h("td", {}, h("a", { href: routeHref({ page: "overview", run: run.ref }), class: "run-link" }, run.name || run.ref)),
        h("td", {}, formatUnixTime(run.created_unix_ns ?? 0)),
        h("td", {}, run.tags?.commit ?? ""),
        ...cells,
      ),
    );
  }
  table.appendChild(body);

  const reasons = h("section", { id: "explain-reasons" });
  for (const run of [...runs].reverse()) {
    const items = run.models.map((model) => {
      const breaks = model.breaks.map((site) =>
        h(
          "li",
          { class: "break" },
          h("code", { class: "break-reason" }, site.reason ?? ""),
          ` at ${site.file ?? "?"}:${site.line ?? "?"} in ${site.function ?? "?"}`,
          site.count && site.count > 1 ? ` (×${site.count})` : "",
        ),
      );
      const count = (value: number | null | undefined, word: string) => `${value ?? "?"} ${word}${value === 1 ? "" : "s"}`;
      const status = model.status === "ok" ? `${count(model.graphs, "graph")}, ${count(model.graph_breaks, "break")}` : `${model.status}: ${model.error ?? ""}`;
      return h("div", { class: "explain-model" }, h("h4", {}, modelName(model), " ", h("small", {}, status)), breaks.length ? h("ul", {}, ...breaks) : h("p", { class: "hint" }, "no graph breaks"));
    });
    reasons.appendChild(h("div", { class: "explain-run", data: { ref: run.ref } }, h("h3", {}, `${run.name || "run"} (${run.ref}), ${runLabel(run)}`), run.problem ? h("p", { class: "warning" }, run.problem) : "", ...items));
  }

  root.replaceChildren(
    h("h1", {}, "Explain runs"),
    h("p", {}, `${runs.length} run${runs.length === 1 ? "" : "s"} of opsight explain, oldest first; ${models.length} model${models.length === 1 ? "" : "s"}.`),
    legend,
    h("div", { class: "charts" }, h("figure", {}, breaksChart, h("figcaption", {}, "graph breaks per run")), h("figure", {}, graphsChart, h("figcaption", {}, "graphs per run"))),
    table,
    h("h2", {}, "Break reasons, newest run first"),
    reasons,
  );
  drawSeriesChart(breaksChart, explainSeries(runs, "graph_breaks"), labels, 560, 220);
  drawSeriesChart(graphsChart, explainSeries(runs, "graphs"), labels, 560, 220);
}
