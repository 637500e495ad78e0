// End to end: the real `opsight ui` serving runs recorded here (the demo model twice, and
// a trace whose span and run names are HTML), each page opened in Debian's Chromium, the
// numbers on the page checked against `opsight report ... --format json` and `opsight
// compare ... --format json` for the same runs; zoom, click, search, range marks, flame
// graph zoom and compare exercised; a screenshot of every page in web/test-artifacts/.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import {
  isolatedWorld,
  repository,
  launchBrowser,
  navigate,
  openPage,
  removeFolder,
  reportJson,
  runOpsight,
  screenshot,
  startUi,
  uiSession,
} from "./harness.mjs";

const HOSTILE = "<img src=x onerror=alert(1)>";

describe("opsight ui in Chromium", () => {
  // Two recordings of the demo model (runs 1 and 2), then the hostile trace (run 3).
  const session = uiSession("opsight-ui-e2e-", async ({ folder, env }) => {
    for (const requests of ["4", "6"])
      runOpsight(["demo", "--requests", requests, "--bench-iterations", "0", "--output", join(folder, `demo${requests}`)], env, { cwd: folder });
    const events = [
      { name: "request", ph: "X", ts: 0, dur: 500, pid: 1, tid: 1 },
      { name: HOSTILE, ph: "X", ts: 100, dur: 200, pid: 1, tid: 1, args: { note: "<script>alert(2)</script>" } },
    ];
    writeFileSync(join(folder, "hostile.json"), JSON.stringify({ traceEvents: events }));
    runOpsight(["save", join(folder, "hostile.json"), "--name", "<b>hostile</b>"], env);
  });
  let env, page, problems;
  before(() => ({ env, page, problems } = session));

  test("the runs page lists, searches and selects runs", async () => {
    await navigate(page, "#/runs");
    const names = await page.locator("table.runs a.run-link").allTextContents();
    assert.equal(names.length, 3);
    assert.ok(names.includes("<b>hostile</b>"), `the hostile run name shows as text: ${names}`);
    assert.equal(await page.locator("table.runs b").count(), 0, "no <b> element was made from a run name");
    await screenshot(page, "runs");
    await page.fill("#run-search", "tiny-bert");
    await page.press("#run-search", "Enter");
    await page.waitForFunction(() => document.querySelectorAll("table.runs a.run-link").length === 2);
    await page.fill("#run-search", "");
    await page.press("#run-search", "Enter");
    await page.waitForFunction(() => document.querySelectorAll("table.runs a.run-link").length === 3);
    await page.check('input[data-ref="1"]');
    await page.check('input[data-ref="2"]');
    assert.equal(await page.isEnabled("#compare-selected"), true);
  });

  test("the overview shows the report's summary, overhead and latency charts", async () => {
    await navigate(page, "#/runs/1");
    await page.waitForSelector("#latency canvas#cdf");
    const expected = reportJson(["report", "1"], env);
    const shown = await page.$$eval("#summary-table tbody tr", (rows) =>
      rows.map((row) => {
        const cells = [...row.querySelectorAll("td")];
        return { name: cells[0].textContent, values: cells.slice(1).map((cell) => Number(cell.dataset.value)) };
      }),
    );
    assert.equal(shown.length, expected.length);
    const keys = ["count", "total_ns", "self_ns", "min_ns", "mean_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns", "stddev_ns"];
    for (const row of expected) {
      const onPage = shown.find((candidate) => candidate.name === row.name);
      assert.ok(onPage, `row ${row.name} is on the page`);
      assert.deepEqual(onPage.values, keys.map((key) => row[key]), `numbers of ${row.name}`);
    }
    const overhead = await page.$eval("#overhead", (element) => ({ ns: Number(element.dataset.overheadNs), dropped: Number(element.dataset.dropped), text: element.textContent }));
    const table = reportJson(["report", "1", "--table"], env);
    assert.equal(overhead.dropped, table.events_dropped);
    assert.equal(overhead.ns, table.overhead_ns, "the overhead shown is the report's");
    assert.ok(table.overhead_ns > 0, "a recorded run has a tracer overhead");
    assert.match(overhead.text, /^tracer overhead: /);
    await page.click("#summary-table tbody tr:nth-child(2)");
    await page.waitForFunction((name) => document.querySelector("#latency-name")?.textContent === name, shown[1].name);
    await screenshot(page, "overview");
  });

  test("a span named like HTML stays text everywhere", async () => {
    await navigate(page, "#/runs/3");
    const names = await page.locator("#summary-table tbody td:first-child").allTextContents();
    assert.ok(names.includes(HOSTILE), `the name is shown as text: ${names}`);
    assert.equal(await page.locator("main img").count(), 0, "no <img> was made from a span name");
    await navigate(page, "#/runs/3/timeline?q=onerror");
    await page.waitForSelector("#slice-name");
    assert.equal(await page.textContent("#slice-name"), HOSTILE);
    assert.ok((await page.textContent("#slice-details")).includes("<script>alert(2)</script>"));
    assert.equal(await page.locator("main img, #slice-details script").count(), 0);
    await screenshot(page, "hostile-name");
    assert.deepEqual(problems, [], "no dialog and no page error");
  });

  test("the timeline draws, zooms with the keyboard, selects, searches and measures", async () => {
    await navigate(page, "#/runs/1/timeline");
    await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
    const window0 = await page.evaluate(() => window.opsightTimeline.absoluteWindow());
    await page.focus("canvas.timeline-canvas");
    await page.keyboard.down("w");
    await page.waitForTimeout(300);
    await page.keyboard.up("w");
    const window1 = await page.evaluate(() => window.opsightTimeline.absoluteWindow());
    assert.ok(window1[1] - window1[0] < (window0[1] - window0[0]) * 0.8, `W zooms in: ${window0} -> ${window1}`);
    await page.keyboard.press("d");
    const window2 = await page.evaluate(() => window.opsightTimeline.absoluteWindow());
    assert.ok(window2[0] > window1[0], "D pans later");
    await page.waitForFunction(() => location.hash.includes("start="), null, { timeout: 5000 });

    // Search: the first "infer" span is selected and its details shown; next moves on.
    await page.fill("#timeline-search", "infer");
    await page.press("#timeline-search", "Enter");
    await page.waitForFunction(() => document.querySelector("#search-status")?.textContent?.startsWith("1 of"));
    assert.equal(await page.textContent("#slice-name"), "infer");
    const firstHash = await page.evaluate(() => location.hash);
    await page.click("#search-next");
    await page.waitForFunction(() => document.querySelector("#search-status")?.textContent?.startsWith("2 of"));
    await page.waitForFunction((before) => location.hash !== before, firstHash, { timeout: 5000 });

    // A click on the canvas where a span is drawn selects it (the first root at depth 0).
    await navigate(page, "#/runs/1/timeline");
    await page.waitForSelector("canvas.timeline-canvas[data-complete=true]");
    const box = await page.locator("canvas.timeline-canvas").boundingBox();
    const point = await page.evaluate(() => {
      const view = window.opsightTimeline;
      return { x: 200 + view.viewport.width * 0.5, y: 24 + 22 + 9 };
    });
    await page.mouse.click(box.x + point.x, box.y + point.y);
    await page.waitForSelector("#slice-name", { timeout: 10000 });
    assert.ok((await page.textContent("#slice-name")).length > 0);

    // shift+drag marks a range whose exact duration is shown.
    await page.keyboard.down("Shift");
    await page.mouse.move(box.x + 300, box.y + 60);
    await page.mouse.down();
    await page.mouse.move(box.x + 500, box.y + 60, { steps: 4 });
    await page.mouse.up();
    await page.keyboard.up("Shift");
    const range = await page.evaluate(() => window.opsightTimeline.rangeDuration());
    const nsPerPixel = await page.evaluate(() => window.opsightTimeline.viewport.nsPerPixel());
    assert.ok(Math.abs(range - 200 * nsPerPixel) < 2 * nsPerPixel, `range ${range} ~ 200 px`);
    await page.waitForSelector("#range-table");
    const shownDuration = Number(await page.getAttribute("#range-duration", "data-value"));
    assert.ok(Math.abs(shownDuration - range) <= 2, `the range summary covers the marked range: ${shownDuration} vs ${range}`);
    await screenshot(page, "timeline");
  });

  test("the call tree equals the merged tree report, and the flame graph zooms", async () => {
    await navigate(page, "#/runs/1/tree");
    const expected = reportJson(["report", "1", "--merged-tree"], env);
    const nodes = expected.nodes;
    // Depth first, each node's children by total time, largest first (ties in report order).
    const roots = nodes.map((node, index) => [node, index]).filter(([node]) => node.parent === null).sort(([a, i], [b, j]) => b.total_ns - a.total_ns || i - j);
    const expectedOrder = [];
    const visit = (index) => {
      expectedOrder.push(index);
      nodes
        .map((node, child) => [node, child])
        .filter(([node]) => node.parent === index)
        .sort(([a, i], [b, j]) => b.total_ns - a.total_ns || i - j)
        .forEach(([, child]) => visit(child));
    };
    roots.forEach(([, index]) => visit(index));
    const rows = await page.$$eval("#tree-table tbody tr", (trs) => trs.map((tr) => ({ index: Number(tr.dataset.index), total: Number(tr.querySelectorAll("td")[3].dataset.value), hidden: tr.hidden })));
    assert.deepEqual(rows.map((row) => row.index), expectedOrder);
    assert.deepEqual(rows.map((row) => row.total), expectedOrder.map((index) => nodes[index].total_ns));
    // It opens three levels deep: the rows shown are exactly those of depth 0 to 2.
    assert.deepEqual(rows.filter((row) => !row.hidden).map((row) => row.index), expectedOrder.filter((index) => nodes[index].depth <= 2));
    assert.match(await page.textContent("#tree-run"), /demo/);
    // A click on a frame of the icicle selects that node in both graphs and in the table.
    const box = await page.locator("#icicle").boundingBox();
    await page.mouse.move(box.x + 2, box.y + 18 * 1 + 9);
    const hovered = await page.textContent("#flame-tooltip");
    await page.mouse.click(box.x + 2, box.y + 18 * 1 + 9);
    const focus = await page.getAttribute("#icicle", "data-focus");
    assert.notEqual(focus, "", "the click selected a frame");
    assert.equal(nodes[Number(focus)].depth, 1);
    assert.ok(hovered.startsWith(`${nodes[Number(focus)].name}:`), hovered);
    assert.equal(await page.getAttribute("#flame-graph", "data-focus"), focus);
    assert.equal(await page.getAttribute("#tree-table tbody tr.selected", "data-index"), focus);
    assert.match(page.url(), new RegExp(`focus=${focus}(&|$)`));
    await screenshot(page, "flame-graph");
  });

  test("the call tree filters by name, expands and collapses all, and a link restores it", async () => {
    await navigate(page, "#/runs/1/tree");
    const nodes = reportJson(["report", "1", "--merged-tree"], env).nodes;
    const shown = async () => (await page.$$eval("#tree-table tbody tr", (trs) => trs.filter((tr) => !tr.hidden).map((tr) => Number(tr.dataset.index)))).sort((a, b) => a - b);
    await page.click("#tree-expand-all");
    assert.equal((await shown()).length, nodes.length);
    await page.click("#tree-collapse-all");
    assert.deepEqual(await shown(), nodes.flatMap((node, index) => (node.parent === null ? [index] : [])));
    // A filter shows the matching code paths and their callers, whatever is collapsed.
    const deepest = nodes.reduce((best, node, index) => (node.depth > nodes[best].depth ? index : best), 0);
    const needle = nodes[deepest].name.slice(-6).toUpperCase();
    await page.fill("#tree-filter", needle);
    const keep = new Set();
    nodes.forEach((node, index) => {
      if (!node.name.toLowerCase().includes(needle.toLowerCase())) return;
      for (let at = index; at !== null && !keep.has(at); at = nodes[at].parent) keep.add(at);
    });
    assert.deepEqual(await shown(), [...keep].sort((a, b) => a - b));
    assert.ok(keep.has(deepest));
    assert.equal(Number(await page.getAttribute("#tree-matches", "data-matched")), nodes.filter((node) => node.name.toLowerCase().includes(needle.toLowerCase())).length);
    // Select the deepest match from its row: both graphs zoom into it.
    await page.click(`#tree-table tbody tr[data-index="${deepest}"] button.node-name`);
    assert.equal(await page.getAttribute("#flame-graph", "data-focus"), String(deepest));
    await page.selectOption("#flame-mode", "self");
    await page.selectOption("#tree-order", "run");
    const link = page.url();
    for (const key of ["filter=", `focus=${deepest}`, "widths=self", "order=run", "x="]) assert.ok(link.includes(key), `${key} in ${link}`);
    const rowsBefore = await page.$$eval("#tree-table tbody tr", (trs) => trs.map((tr) => `${tr.dataset.index}:${tr.hidden}:${[...tr.classList].sort().join(" ")}`));
    // A fresh page on the link: the same rows, order, filter, selection and widths.
    const second = await page.context().newPage();
    await second.goto(link);
    await second.waitForSelector("body[data-ready=true]", { timeout: 30000 });
    await second.waitForSelector("#tree-table");
    assert.deepEqual(await second.$$eval("#tree-table tbody tr", (trs) => trs.map((tr) => `${tr.dataset.index}:${tr.hidden}:${[...tr.classList].sort().join(" ")}`)), rowsBefore);
    assert.equal(await second.inputValue("#tree-filter"), needle);
    assert.equal(await second.inputValue("#flame-mode"), "self");
    assert.equal(await second.getAttribute("#icicle", "data-focus"), String(deepest));
    assert.equal(second.url(), link, "restoring does not rewrite the link");
    await second.close();
    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, "call-tree-filtered");
  });

  test("latency details show the operator table and the breakdown of opsight report", async () => {
    await navigate(page, "#/runs/1/details?span=handle_request");
    await page.waitForSelector("#breakdown-table");
    const operators = reportJson(["report", "1", "--ops"], env);
    const shownOperators = await page.$$eval("#operators-table tbody tr", (rows) =>
      Object.fromEntries(rows.map((row) => [row.querySelectorAll("td")[0].textContent, Number(row.querySelectorAll("td")[3].dataset.value)])),
    );
    assert.equal(Object.keys(shownOperators).length, operators.operators.length);
    for (const row of operators.operators) assert.equal(shownOperators[row.name], row.self_ns, `self time of ${row.name}`);
    const breakdown = reportJson(["report", "1", "--breakdown", "handle_request"], env);
    const phases = await page.$$eval("#breakdown-table tbody tr", (rows) =>
      rows.map((row) => [row.querySelectorAll("td")[0].textContent, Number(row.querySelectorAll("td")[3].dataset.value)]),
    );
    assert.deepEqual(
      phases.sort(),
      breakdown.phases.map((phase) => [phase.phase, phase.mean_ns]).sort(),
    );
    assert.ok((await page.locator("#breakdown-bar span").count()) > 0);
    await screenshot(page, "details");
  });

  test("compare shows opsight compare's verdicts", async () => {
    await navigate(page, "#/runs");
    await page.check('input[data-ref="1"]');
    await page.check('input[data-ref="2"]');
    await page.click("#compare-selected");
    await page.waitForSelector("#compare-table");
    await page.waitForSelector("body[data-ready=true]");
    const expected = reportJson(["compare", "1", "2"], env);
    const shown = await page.$$eval("#compare-table tbody tr", (rows) =>
      Object.fromEntries(rows.map((row) => [row.querySelectorAll("td")[0].textContent, row.querySelectorAll("td")[1].textContent])),
    );
    assert.equal(Object.keys(shown).length, expected.names.length);
    for (const row of expected.names) assert.equal(shown[row.name], row.verdict, `verdict of ${row.name}`);
    await screenshot(page, "compare");
  });

  test("an API error is shown on the page, not thrown away", async () => {
    await navigate(page, "#/runs/999");
    assert.match(await page.textContent("#error"), /^404: /);
  });
});

describe("opsight ui on a non-loopback address", () => {
  test("API calls need the printed token; the app carries it from the URL", async () => {
    const { folder, env } = isolatedWorld("opsight-ui-token-");
    const ui = await startUi(["--host", "0.0.0.0"], env);
    try {
      const token = new URL(ui.url).searchParams.get("token");
      assert.match(token, /^[0-9a-f]{32}$/);
      assert.ok(ui.output().includes(token));
      const base = ui.url.split("?")[0];
      assert.equal((await fetch(`${base}api/runs`)).status, 401);
      assert.equal((await fetch(`${base}api/runs`, { headers: { Authorization: `Bearer ${token}` } })).status, 200);
      const browser = await launchBrowser();
      try {
        const problems = [];
        const page = await openPage(browser.context, ui.url, problems);
        assert.equal(await page.locator("#error").count(), 0, "the app's calls carried the token");
        // The token leaves the address bar (and so the history, screenshots and shared links)
        // after the first load; the tab keeps it, across a reload too.
        await page.waitForFunction(() => !window.location.search.includes("token="));
        assert.ok(!page.url().includes(token), page.url());
        await page.reload();
        await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
        assert.equal(await page.locator("#error").count(), 0, "a reload still carries the token");
        assert.deepEqual(problems, []);
      } finally {
        await browser.close();
      }
    } finally {
      assert.equal(await ui.stop(), 0);
      removeFolder(folder);
    }
  });
});

describe("opsight ui on a GPU trace", () => {
  // torch.profiler's export of an MLP on CUDA (kernels, cudaLaunchKernel, ac2g flows).
  const session = uiSession("opsight-ui-gpu-", ({ env }) =>
    runOpsight(["save", join(repository, "tests/data/pytorch_profiler_cuda_small.json"), "--name", "gpu"], env),
  );

  test("a kernel's details name its launching call, operator, module and line", async () => {
    const { env, page } = session;
    await navigate(page, "#/runs/1/timeline");
    await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
    await page.fill("#timeline-search", "sm90_xmma_gemm");
    await page.press("#timeline-search", "Enter");
    await page.waitForSelector("#slice-launch", { timeout: 10000 });
    const launch = await page.textContent("#slice-launch");
    for (const part of ["cudaLaunchKernel", "aten::addmm", "nn.Module: Linear_", "torch/nn/modules/linear.py:125"])
      assert.ok(launch.includes(part), `launched by names ${part}: ${launch}`);
    await page.click("#slice-launch a.slice-link");
    await page.waitForFunction(() => document.querySelector("#slice-name")?.textContent === "cudaLaunchKernel");
    assert.equal(await page.locator("#slice-launch").count(), 0, "a CPU slice has no launch");
    assert.ok((await page.textContent("#slice-parents")).includes("aten::addmm"));

    // The details page splits each inference between host and device, as the report does.
    const split = reportJson(["report", join(repository, "tests/data/pytorch_profiler_cuda_small.json"), "--breakdown", "inference_step"], env).host_device;
    await navigate(page, "#/runs/1/details?span=inference_step");
    await page.waitForSelector("#host-device-table", { timeout: 10000 });
    const labels = await page.locator("#host-device-table tbody tr td:first-child").allTextContents();
    assert.deepEqual(labels, ["host (the span)", "launch overhead (CUDA API)", "synchronize (waiting for the GPU)", "GPU busy", "GPU idle gaps", "HtoD copies", "DtoH copies"]);
    const heading = await page.textContent("#host-device-table >> xpath=preceding-sibling::h3[1]");
    assert.ok(heading.includes(`${split.inferences_with_gpu_work} inferences with GPU work`), heading);
    assert.deepEqual(session.problems, []);
  });
});
