import { describe, expect, test } from "vitest";
import type { RunEntry } from "../api";
import { parseRoute, routeHref } from "../router";
import { groupSweeps, paretoFrontier } from "./llm";

function run(ref: string, tags: Record<string, string>, created = 0): RunEntry {
  return { ref, kind: "run", name: ref, tags, created_unix_ns: created };
}

describe("llm sweeps", () => {
  test("runs are grouped by sweep, in the sweep's order, newest sweep first", () => {
    const sweeps = groupSweeps([
      run("3", { llm_bench: "1", sweep: "a", concurrency: "4", point: "2", model: "gpt2" }, 30),
      run("1", { llm_bench: "1", sweep: "a", concurrency: "1", point: "0", model: "gpt2" }, 10),
      run("2", { llm_bench: "1", sweep: "a", concurrency: "2", point: "1", model: "gpt2" }, 20),
      run("9", { llm_bench: "1", sweep: "b", rate: "0.5", point: "0" }, 90),
      run("5", { sweep: "c" }, 50), // not a bench run
    ]);
    expect(sweeps.map((sweep) => sweep.id)).toEqual(["b", "a"]);
    expect(sweeps[1].runs.map((entry) => entry.ref)).toEqual(["1", "2", "3"]);
    expect(sweeps[1].key).toBe("concurrency");
    expect(sweeps[0].key).toBe("rate");
    expect(sweeps[1].model).toBe("gpt2");
  });

  test("the Pareto frontier keeps the points no other point beats on both axes", () => {
    const points = [
      { name: "c1", latency: 10, throughput: 100 },
      { name: "c2", latency: 12, throughput: 190 },
      { name: "c4", latency: 20, throughput: 180 }, // slower and less: dominated by c2
      { name: "c8", latency: 40, throughput: 300 },
      { name: "c16", latency: 90, throughput: 300 }, // as much, slower: dominated by c8
    ];
    expect(paretoFrontier(points).map((point) => point.name)).toEqual(["c1", "c2", "c8"]);
    expect(paretoFrontier([])).toEqual([]);
  });

  test("#/llm and #/llm/SWEEP route to the page", () => {
    expect(parseRoute("#/llm")).toEqual({ page: "llm", run: undefined, query: {} });
    expect(parseRoute("#/llm/abc123")).toEqual({ page: "llm", run: "abc123", query: {} });
    expect(routeHref({ page: "llm", run: "abc123" })).toBe("#/llm/abc123");
    expect(routeHref({ page: "llm" })).toBe("#/llm");
  });
});
