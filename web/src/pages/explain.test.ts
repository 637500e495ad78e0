import { expect, test } from "vitest";
import type { ExplainModel, ExplainRun } from "../api";
import { explainSeries, modelNames } from "./explain";

const model = (name: string, graphs: number | null, breaks: number | null, status = "ok"): ExplainModel => ({
  span: `explain ${name}`, model: name, family: "", status, error: "", graphs, graph_breaks: breaks, ops: null,
  backend: "", explain_seconds: null, compile_seconds: null, breaks: [],
});
const run = (ref: string, models: ExplainModel[]): ExplainRun => ({ ref, kind: "run", name: ref, models });

test("each model is a series over the runs, null where a run lacks it", () => {
  const runs = [run("1", [model("bert", 2, 1)]), run("2", [model("bert", 3, 2), model("mlp", 1, 0)]), run("3", [model("mlp", null, null, "crashed")])];
  expect(modelNames(runs)).toEqual(["bert", "mlp"]);
  const breaks = explainSeries(runs, "graph_breaks");
  expect(breaks.map((series) => series.values)).toEqual([
    [1, 2, null],
    [null, 0, null],
  ]);
  expect(explainSeries(runs, "graphs")[0].values).toEqual([2, 3, null]);
});
