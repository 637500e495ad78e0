// End to end, the pages fit a 1,280 × 800 window (issue 31 item 9): a store of realistic
// runs (the demo model twice; a sampled `opsight run` of a program with a long command line,
// a long name and many tags; a saved trace with long span names and tags of its own), and
// each page (runs, overview, details, compare, explain, LLM sweeps) opened at that size
// must not scroll sideways (the document is no wider than the window). The overview's
// metric charts are titled in words with units, not with the counters' raw names; the
// per-inference chart's bars span the chart's plot. A screenshot of each page at that size
// goes to web/test-artifacts/fit-*.png.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { assertFitsWindow, navigate, reportJson, runOpsight, uiSession } from "./harness.mjs";

const WIDTH = 1280;
const HEIGHT = 800;

const PROGRAM = `import sys, time
held = []
start = time.time()
while time.time() - start < 0.5:
    sum(i * i for i in range(20000))
    held.append(bytearray(200000))
`;

// Tags as a team would put on nightly runs: many, some with long values.
const TAGS = [
  "kind=benchmark",
  "model=tiny-bert-uncased-finetuned-sst2",
  "backend=onnxruntime-cpu",
  "batch=8",
  "threads=4",
  "commit=3f9a2c71d0b84e55a6c1f0e2b7d94a8c3e1f5b60",
  "branch=feature/quantized-attention-kernels",
  "host=build-agent-07.ci.internal.example.org",
  "reviewed",
  "nightly",
];

const assertFits = (page, name) => assertFitsWindow(page, name, { width: WIDTH, height: HEIGHT });

describe(`opsight ui pages fit ${WIDTH} × ${HEIGHT}`, () => {
  const session = uiSession("opsight-ui-fit-", ({ folder, env }) => {
    // Runs 1 and 2: the demo model (a breakdown, operators; compared with each other).
    for (const requests of ["6", "4"])
      runOpsight(["demo", "--requests", requests, "--bench-iterations", "0", "--output", join(folder, `demo${requests}`)], env, { cwd: folder });
    // Run 3: a program sampled every 20 ms, with the command line of a real job.
    writeFileSync(join(folder, "serve_benchmark.py"), PROGRAM);
    const command = ["python3", "serve_benchmark.py", "--model-path", "/mnt/models/checkpoints/tiny-bert-uncased-finetuned-sst2/epoch-12/model.onnx",
      "--batch-size", "8", "--num-threads", "4", "--warmup-iterations", "20", "--report-json", "/var/tmp/results/nightly/tiny-bert-cpu.json"];
    runOpsight(
      ["run", "--sample-ms", "20", "--name", "nightly serving benchmark: tiny-bert on onnxruntime-cpu, batch 8, 4 threads",
        ...TAGS.flatMap((tag) => ["--tag", tag]), "--output", join(folder, "sampled.opsight"), "--", ...command],
      env,
      { cwd: folder },
    );
    // Run 4: a saved trace whose span names are long, tagged too.
    const long = "model.encoder.layers.11.attention.self.scaled_dot_product_attention_with_rotary_embeddings";
    const events = [
      { name: "request", ph: "X", ts: 0, dur: 900, pid: 1, tid: 1 },
      { name: long, ph: "X", ts: 100, dur: 500, pid: 1, tid: 1 },
      { name: `${long}.softmax`, ph: "X", ts: 200, dur: 100, pid: 1, tid: 1 },
    ];
    writeFileSync(join(folder, "long.json"), JSON.stringify({ traceEvents: events }));
    runOpsight(["save", join(folder, "long.json"), "--name", `imported from ${"/home/someone/traces/".repeat(3)}long.json`, ...TAGS.slice(0, 6).flatMap((tag) => ["--tag", tag])], env);
  });
  let env, page;
  before(async () => {
    ({ env, page } = session);
    await page.setViewportSize({ width: WIDTH, height: HEIGHT });
  });

  test("the runs page does not scroll sideways, with long commands and many tags", async () => {
    await navigate(page, "#/runs");
    assert.equal(await page.locator("table.runs a.run-link").count(), 4);
    const tags = await page.locator('table.runs tr:has(input[data-ref="3"]) span.tag').count();
    assert.equal(tags, TAGS.length, "every tag of the sampled run is on the page");
    await assertFits(page, "runs");
  });

  test("the overview fits, and titles its metric charts in words with units", async () => {
    await navigate(page, "#/runs/1");
    await page.waitForSelector("#latency canvas#cdf");
    await assertFits(page, "overview");
    await navigate(page, "#/runs/4");
    await page.waitForSelector("#latency canvas#cdf");
    await assertFits(page, "overview-long-names");
    await navigate(page, "#/runs/3");
    await page.waitForSelector("#metrics figure.metric");
    await page.locator("#metrics").scrollIntoViewIfNeeded();
    await assertFits(page, "overview-metrics");
    const titles = await page.$$eval("#metrics figure.metric", (figures) =>
      Object.fromEntries(figures.map((figure) => [figure.dataset.name, figure.querySelector(".metric-name").textContent])),
    );
    const recorded = reportJson(["report", "3", "--metrics"], env).counters.map((counter) => counter.name);
    assert.deepEqual(Object.keys(titles).sort(), [...new Set(recorded)].sort(), "a chart per recorded counter");
    assert.equal(titles["process.rss_bytes"], "resident memory (bytes)");
    assert.equal(titles["process.cpu_percent"], "CPU use (% of one core)");
    for (const [name, title] of Object.entries(titles)) {
      assert.doesNotMatch(title, /_|process\./, `${name} is titled in words: ${title}`);
      if (name.endsWith("_per_s")) assert.match(title, /\(bytes\/s\)$/, `${name} names its unit: ${title}`);
    }
  });

  test("the details page fits, and its per-inference chart spans its width", async () => {
    await navigate(page, "#/runs/1/details?span=handle_request");
    await page.waitForSelector("#inference-chart");
    await page.locator("#inference-bars").scrollIntoViewIfNeeded();
    await assertFits(page, "details");
    await navigate(page, "#/runs/4/details?span=request");
    await assertFits(page, "details-long-names");
    await navigate(page, "#/runs/1/details?span=handle_request");
    await page.waitForSelector("#inference-chart");
    const use = await page.$eval("#inference-chart", (canvas) => ({
      canvas: canvas.getBoundingClientRect().width,
      holder: canvas.parentElement.getBoundingClientRect().width,
      plot: Number(canvas.dataset.plotWidth),
      bars: Number(canvas.dataset.barsWidth),
    }));
    assert.ok(use.canvas >= use.holder * 0.9, `the chart is as wide as its section: ${JSON.stringify(use)}`);
    assert.ok(use.bars >= use.plot * 0.95, `the bars fill the plot: ${JSON.stringify(use)}`);
  });

  test("the call tree fits, long names wrapped, every row open", async () => {
    await navigate(page, "#/runs/4/tree");
    await page.waitForSelector("#tree-table");
    await page.click("#tree-expand-all");
    await assertFits(page, "tree-long-names");
  });

  test("the compare, explain and LLM pages fit", async () => {
    await navigate(page, "#/compare/1/2");
    await page.waitForSelector("table");
    await assertFits(page, "compare");
    await navigate(page, "#/compare/4/3");
    await assertFits(page, "compare-long-names");
    await navigate(page, "#/explain");
    await assertFits(page, "explain");
    await navigate(page, "#/llm");
    await assertFits(page, "llm");
  });
});
