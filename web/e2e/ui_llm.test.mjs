// End to end, the LLM sweeps page (#/llm, docs/llm.md): a real `opsight bench --generate`
// sweep of a random-weight GPT-2 in process (concurrency 1 and 2, saved in the test's store),
// then the page in Chromium: the sweep listed, its points side by side with the numbers the
// bench's JSON report gives, the throughput-latency plot, a CDF per point of TTFT, ITL and
// e2e, and each point's link to its requests' token timelines. Needs the Python package with torch and transformers (the opsight beside $OPSIGHT_CLI).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { assertFitsWindow, navigate, runOpsight, screenshot, uiSession } from "./harness.mjs";

describe("opsight ui: LLM sweeps", () => {
  const session = uiSession("opsight-ui-llm-", ({ folder, env }) => {
    const output = join(folder, "report.json");
    runOpsight(
      ["bench", "--generate", "random:gpt2", "--sweep", "concurrency=1,2", "--saturation", "0", "--requests", "4",
        "--input-len", "6", "--output-len", "5", "--warmup", "1", "--format", "json", "-o", output],
      env,
      { cwd: folder, timeout: 300000 },
    );
    return JSON.parse(readFileSync(output, "utf8"));
  });
  let page, problems, report;
  before(() => ({ page, problems, recorded: report } = session));

  test("the sweep is listed and its points sit side by side with the report's numbers", async () => {
    await navigate(page, "#/llm");
    const rows = page.locator("#llm-sweeps tbody tr");
    assert.equal(await rows.count(), 1);
    assert.equal(await rows.first().getAttribute("data-sweep"), report.sweep);
    await page.locator(".sweep-link").first().click();
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await page.evaluate(() => location.hash), `#/llm/${report.sweep}`);
    const points = page.locator("#llm-points tbody tr");
    assert.equal(await points.count(), report.points.length);
    assert.equal(report.points.length, 2);
    for (let index = 0; index < report.points.length; index += 1) {
      const expected = report.points[index];
      const row = points.nth(index);
      assert.equal(Number(await row.getAttribute("data-value")), expected.concurrency);
      const throughput = Number(await row.getAttribute("data-throughput"));
      assert.ok(Math.abs(throughput - expected.summary.output_tokens_per_second) <= 1e-9 * throughput, `${throughput}`);
      const ttftP99 = Number(await row.getAttribute("data-ttft-p99"));
      assert.ok(Math.abs(ttftP99 - expected.summary.metrics.ttft.p99) <= 1e-6 * ttftP99, `${ttftP99}`);
      assert.equal(await row.locator(".run-link").textContent(), String(expected.run));
    }
    assert.deepEqual(problems, []);
  });

  test("the plot and a CDF per point of TTFT, ITL and e2e are drawn", async () => {
    await navigate(page, `#/llm/${report.sweep}`);
    const size = await page.locator("#llm-pareto").evaluate((canvas) => [canvas.width, canvas.height]);
    assert.ok(size[0] > 0 && size[1] > 0);
    // The plot is not blank: the frontier's red and the points' blue are on it.
    const colored = await page.locator("#llm-pareto").evaluate((canvas) => {
      const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let red = 0, blue = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i] > 180 && data[i + 1] < 100 && data[i + 2] < 100) red += 1;
        if (data[i] < 100 && data[i + 1] > 100 && data[i + 2] > 180) blue += 1;
      }
      return { red, blue };
    });
    assert.ok(colored.red > 0 && colored.blue > 0, JSON.stringify(colored));
    const figures = page.locator("#llm-distributions canvas");
    assert.deepEqual(await figures.evaluateAll((canvases) => canvases.map((canvas) => canvas.dataset.metric)), ["TTFT", "ITL", "e2e"]);
    for (const lines of await figures.evaluateAll((canvases) => canvases.map((canvas) => Number(canvas.dataset.lines))))
      assert.equal(lines, 2);
    await screenshot(page, "llm-sweep");
    await assertFitsWindow(page, "llm-sweep", { restore: { width: 1400, height: 900 } });
    await navigate(page, "#/llm");
    await assertFitsWindow(page, "llm-sweeps", { restore: { width: 1400, height: 900 } });
    assert.deepEqual(problems, []);
  });

  test("each point opens its requests' token timelines", async () => {
    await navigate(page, `#/llm/${report.sweep}`);
    const link = page.locator("#llm-points tbody tr").first().locator(".timeline-link");
    assert.equal(await link.getAttribute("href"), `#/runs/${report.points[0].run}/timeline?q=gen_ai.request`);
    await link.click();
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await page.evaluate(() => document.body.dataset.page), "timeline");
    assert.equal(await page.locator("#timeline-search").inputValue(), "gen_ai.request");
    await screenshot(page, "llm-token-timelines");
    assert.deepEqual(problems, []);
  });
});
