// End to end, the UI's later features on runs recorded here: the demo model (breakdown,
// critical path, metrics, a single root's icicle), a trace with flows and instants (and an
// instant named like HTML), and two real `opsight explain` runs of the test models (one
// that breaks, one that does not). Numbers on the pages are checked against `opsight report
// ... --format json`, `opsight runs --format json` and the results `opsight explain
// --output` wrote; a screenshot of each view goes to web/test-artifacts/.
import assert from "node:assert/strict";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { artifacts, assertFitsWindow, navigate, reportJson, repository, runOpsight, uiSession } from "./harness.mjs";

const HTML_NAME = "<b>checkpoint</b>";

async function shot(page, name, selector) {
  if (selector) await page.locator(selector).first().scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: false });
}

describe("opsight ui: flows, instants, critical path, inferences, metrics, icicles, tags, explain", () => {
  const explained = [];
  const session = uiSession("opsight-ui-features-", async ({ folder, env }) => {
    // Run 1: the demo model.
    runOpsight(["demo", "--requests", "6", "--bench-iterations", "0", "--output", join(folder, "demo")], env, { cwd: folder });
    // Run 2: a request handed from a thread to a worker and back (two flows), an instant on
    // the thread and a global one, and a background thread's span off the critical path.
    const events = [
      { name: "thread_name", ph: "M", pid: 1, tid: 1, args: { name: "main" } },
      { name: "thread_name", ph: "M", pid: 1, tid: 2, args: { name: "worker" } },
      { name: "thread_name", ph: "M", pid: 1, tid: 3, args: { name: "background" } },
      { name: "housekeeping", ph: "X", ts: 100, dur: 500, pid: 1, tid: 3 },
      { name: "submit", ph: "X", ts: 0, dur: 100, pid: 1, tid: 1, bind_id: "0x1", flow_out: true },
      { name: "work", ph: "X", ts: 200, dur: 500, pid: 1, tid: 2, bind_id: "0x1", flow_in: true },
      { name: "reply", ph: "X", ts: 650, dur: 40, pid: 1, tid: 2, bind_id: "0x2", flow_out: true },
      { name: "receive", ph: "X", ts: 800, dur: 150, pid: 1, tid: 1, bind_id: "0x2", flow_in: true },
      { name: HTML_NAME, ph: "i", ts: 50, pid: 1, tid: 1, s: "t" },
      { name: "gc", ph: "i", ts: 400, pid: 1, tid: 1, s: "g" },
    ];
    writeFileSync(join(folder, "flows.json"), JSON.stringify({ traceEvents: events }));
    runOpsight(["save", join(folder, "flows.json"), "--name", "flows"], env);
    // Run 3: a program run by opsight run, its RSS, CPU and I/O sampled every 20 ms.
    writeFileSync(
      join(folder, "work.py"),
      "import time\nheld = []\nstart = time.time()\nwhile time.time() - start < 0.6:\n    sum(i * i for i in range(20000))\n    held.append(bytearray(200000))\n",
    );
    runOpsight(["run", "--sample-ms", "20", "--output", join(folder, "sampled.opsight"), "--", "python3", "work.py"], env, { cwd: folder });
    // Runs 4 and 5: opsight explain, twice, as a CI job would on two commits.
    copyFileSync(join(repository, "python/tests/explain_models/breaking.py"), join(folder, "breaking.py"));
    for (const [commit, targets] of [
      ["c0ffee", ["breaking.py:branchy", "breaking.py:plain"]],
      ["beef", ["breaking.py:branchy"]],
    ]) {
      if (commit === "beef") {
        // The next commit drops the print, one of branchy's two breaks.
        const source = readFileSync(join(folder, "breaking.py"), "utf8");
        writeFileSync(join(folder, "breaking.py"), source.replace('print("branchy")', "pass"));
      }
      const output = join(folder, `explain-${commit}.json`);
      runOpsight(["explain", ...targets, "--commit", commit, "--output", output], env, { cwd: folder });
      explained.push(JSON.parse(readFileSync(output, "utf8")));
    }
  });
  let env, page, problems;
  before(() => ({ env, page, problems } = session));

  test("the timeline draws the run's flows as arrows and its instants as markers", async () => {
    await navigate(page, "#/runs/2/timeline");
    await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
    const flows = reportJson(["report", "2", "--tree"], env).flows;
    assert.equal(flows, 2);
    await page.waitForFunction((count) => document.querySelector("canvas.timeline-canvas")?.dataset.flowsDrawn === String(count), flows, { timeout: 10000 });
    assert.equal(await page.getAttribute("canvas.timeline-canvas", "data-instants-drawn"), "2");
    await shot(page, "timeline-flows-instants");
    // A click on the thread instant's marker names it, as text.
    const box = await page.locator("canvas.timeline-canvas").boundingBox();
    const marker = await page.evaluate((name) => window.opsightTimeline.instantHits.find((hit) => hit.name === name), HTML_NAME);
    await page.mouse.click(box.x + marker.x, box.y + marker.y);
    await page.waitForSelector("#instant-name");
    assert.equal(await page.textContent("#instant-name"), HTML_NAME);
    assert.equal(await page.locator("#slice-details b").count(), 0, "no <b> was made from the instant's name");
    assert.equal(Number(await page.getAttribute("#instant-time", "data-value")), 50_000);
    // The switches turn them off, and the URL keeps it.
    await page.uncheck("#show-flows");
    await page.uncheck("#show-instants");
    await page.waitForFunction(() => document.querySelector("canvas.timeline-canvas").dataset.flowsDrawn === "0");
    assert.equal(await page.getAttribute("canvas.timeline-canvas", "data-instants-drawn"), "0");
    await page.waitForFunction(() => location.hash.includes("flows=0") && location.hash.includes("instants=0"));
  });

  test("the critical path is outlined on the timeline, as long as the report says", async () => {
    await navigate(page, "#/runs/1/timeline");
    await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
    assert.equal(await page.getAttribute("canvas.timeline-canvas", "data-critical-outlined"), "0");
    await page.check("#show-critical");
    await page.waitForSelector("#critical-status[data-length-ns]");
    const expected = reportJson(["report", "1", "--critical-path"], env);
    assert.equal(Number(await page.getAttribute("#critical-status", "data-length-ns")), expected.length_ns);
    await page.waitForFunction(() => Number(document.querySelector("canvas.timeline-canvas").dataset.criticalOutlined) > 0);
    await page.waitForFunction(() => location.hash.includes("critical=1"));
    await shot(page, "timeline-critical-path-demo");
    // With a thread beside the path: its span is not on it, the others are, each outlined.
    await navigate(page, "#/runs/2/timeline?critical=1");
    await page.waitForSelector("#critical-status[data-length-ns]");
    const path = reportJson(["report", "2", "--critical-path"], env);
    const onPath = path.by_name.reduce((sum, entry) => sum + entry.count, 0);
    assert.ok(!path.by_name.some((entry) => entry.name === "housekeeping"));
    assert.equal(Number(await page.getAttribute("#critical-status", "data-steps")), onPath);
    await page.waitForFunction((count) => document.querySelector("canvas.timeline-canvas").dataset.criticalOutlined === String(count), onPath);
    await shot(page, "timeline-critical-path");
  });

  test("latency details draw a stacked bar per inference whose phases average to the report's", async () => {
    await navigate(page, "#/runs/1/details?span=handle_request");
    await page.waitForSelector("#inference-chart");
    const breakdown = reportJson(["report", "1", "--breakdown", "handle_request"], env);
    const shown = await page.evaluate(() => window.opsightInferences);
    assert.equal(shown.inference_count, breakdown.inference_count);
    assert.equal(shown.inferences.length, breakdown.inference_count);
    assert.equal(Number(await page.getAttribute("#inference-chart", "data-count")), breakdown.inference_count);
    assert.deepEqual(shown.phases, breakdown.phases.map((phase) => phase.phase));
    breakdown.phases.forEach((phase, index) => {
      const mean = shown.inferences.reduce((sum, inference) => sum + inference.phases[index], 0) / shown.inferences.length;
      // The report prints means to 0.1 ns.
      assert.ok(Math.abs(mean - phase.mean_ns) <= 0.05 + 1e-9 * phase.mean_ns, `mean of ${phase.phase}: ${mean} vs ${phase.mean_ns}`);
    });
    for (const inference of shown.inferences)
      assert.equal(inference.phases.reduce((sum, value) => sum + value, 0), inference.dur, "the phases add up to the inference");
    await page.locator("#inference-chart").scrollIntoViewIfNeeded();
    const box = await page.locator("#inference-chart").boundingBox();
    await page.mouse.move(box.x + 48 + 3, box.y + box.height - 40);
    await page.waitForFunction(() => document.querySelector("#inference-tooltip")?.textContent?.startsWith("inference 1:"));
    await shot(page, "details-inferences", "#inference-bars");
  });

  test("the overview charts every metric over time, with the report's statistics", async () => {
    await navigate(page, "#/runs/3");
    await page.waitForSelector("#metrics h2");
    const metrics = reportJson(["report", "3", "--metrics"], env);
    const shown = await page.$$eval("#metrics figure.metric", (figures) =>
      figures.map((figure) => ({
        name: figure.dataset.name,
        pid: Number(figure.dataset.pid),
        min: Number(figure.querySelector(".metric-min")?.dataset.value),
        max: Number(figure.querySelector(".metric-max")?.dataset.value),
        last: Number(figure.querySelector(".metric-last")?.dataset.value),
      })),
    );
    assert.ok(metrics.counters.length > 0, "the demo samples metrics");
    assert.equal(shown.length, metrics.counters.length);
    for (const counter of metrics.counters) {
      const figure = shown.find((candidate) => candidate.name === counter.name && candidate.pid === counter.pid);
      assert.ok(figure, `a chart of ${counter.name}`);
      assert.deepEqual([figure.min, figure.max, figure.last], [counter.min, counter.max, counter.last], `statistics of ${counter.name}`);
    }
    await shot(page, "overview-metrics", "#metrics");
  });

  test("the call tree page shows the icicle of one chosen root", async () => {
    await navigate(page, "#/runs/1/tree");
    await page.waitForSelector("#root-icicle");
    const tree = reportJson(["report", "1", "--tree"], env);
    assert.equal(await page.locator("#root-select option").count(), tree.roots.length);
    assert.equal(Number(await page.getAttribute("#root-icicle", "data-root-dur-ns")), tree.roots[0].dur_ns);
    const count = (node) => 1 + node.children.reduce((sum, child) => sum + count(child), 0);
    const last = tree.roots.length - 1;
    await page.selectOption("#root-select", String(last));
    await page.waitForFunction((dur) => document.querySelector("#root-icicle").dataset.rootDurNs === String(dur), tree.roots[last].dur_ns);
    assert.equal(Number(await page.getAttribute("#root-icicle", "data-calls")), count(tree.roots[last]));
    await page.locator("#root-icicle").scrollIntoViewIfNeeded();
    const box = await page.locator("#root-icicle").boundingBox();
    await page.mouse.move(box.x + 20, box.y + 9);
    assert.ok((await page.textContent("#root-tooltip")).startsWith(tree.roots[last].name));
    await shot(page, "tree-root-icicle", "#root-icicle-section");
  });

  test("runs are tagged and untagged from the runs page", async () => {
    await navigate(page, "#/runs");
    const input = page.locator('input.tag-add[data-ref="1"]');
    await input.fill("reviewed=<img src=x onerror=alert(1)>");
    await input.press("Enter");
    await page.waitForSelector('tr:has(input[data-ref="1"]) span.tag[data-key="reviewed"]');
    const tagged = JSON.parse(runOpsight(["runs", "--tag", "reviewed", "--format", "json"], env));
    assert.deepEqual(tagged.map((run) => run.id), [1]);
    assert.equal(tagged[0].tags.reviewed, "<img src=x onerror=alert(1)>");
    assert.equal(await page.locator("table.runs img").count(), 0, "the tag's value shows as text");
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot(page, "runs-tags");
    await page.click('tr:has(input[data-ref="1"]) span.tag[data-key="reviewed"] button.tag-remove');
    await page.waitForFunction(() => !document.querySelector('span.tag[data-key="reviewed"]'));
    assert.deepEqual(JSON.parse(runOpsight(["runs", "--tag", "reviewed", "--format", "json"], env)), []);
    assert.deepEqual(problems, [], "no dialog and no page error");
  });

  test("the explain page shows each explain run's graphs, breaks and reasons over time", async () => {
    await navigate(page, "#/explain");
    await page.waitForSelector("#explain-table");
    const stored = JSON.parse(runOpsight(["runs", "--tag", "kind=explain", "--format", "json"], env));
    assert.equal(stored.length, 2);
    const rows = await page.$$eval("#explain-table tbody tr", (trs) =>
      trs.map((tr) => ({
        ref: tr.dataset.ref,
        cells: Object.fromEntries([...tr.querySelectorAll("td[data-model]")].map((td) => [td.dataset.model, [td.dataset.graphs, td.dataset.breaks]])),
      })),
    );
    assert.deepEqual(rows.map((row) => row.ref), stored.map((run) => String(run.id)).reverse(), "oldest first");
    explained.forEach((result, index) => {
      for (const model of result.models)
        assert.deepEqual(rows[index].cells[model.model], [String(model.graphs), String(model.graph_breaks)], `run ${index + 1}, ${model.model}`);
    });
    assert.equal(explained[1].models[0].graph_breaks, explained[0].models[0].graph_breaks - 1, "the second commit breaks once less");
    const reasons = await page.locator("#explain-reasons .break-reason").allTextContents();
    const expected = explained.flatMap((result) => result.models.flatMap((model) => model.breaks.map((site) => site.reason)));
    assert.deepEqual([...reasons].sort(), [...expected].sort());
    await shot(page, "explain");
    await assertFitsWindow(page, "explain-runs", { restore: { width: 1400, height: 900 } });
    assert.deepEqual(problems, [], "no dialog and no page error");
  });
});
