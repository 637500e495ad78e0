// End to end, a remote benchmark's merged run on the timeline (docs/remote.md): a real Ray
// cluster on this machine (a head labelled nodeA, a node labelled nodeB) and the installed
// `opsight bench --cluster ADDRESS --on nodeA/ort-cpu --on nodeB/eager`, recorded by
// record_remote_run.py (the Python beside $OPSIGHT_CLI, with Ray and torch) into the test's
// store; then the run in Chromium: the caller's process and one process per worker named
// `worker N: HARDWARE/BACKEND`, each worker's query spans on its own track, its labels (host,
// Ray node id, hardware, clock offset) in its header, drawn on the canvas; the runs page
// lists the run with its many tags (a dozen per worker) folded after 12 behind "+N more",
// and fits a 1,280-pixel window folded and unfolded. Screenshots go to web/test-artifacts/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { assertFitsWindow, navigate, opsight, screenshot, uiSession } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));

async function openTimeline(page, hash) {
  await navigate(page, hash);
  await page.waitForSelector("canvas.timeline-canvas[data-restored=true]", { timeout: 30000 });
  await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
}

describe("opsight ui: a remote benchmark's merged run", () => {
  const session = uiSession("opsight-ui-remote-", ({ folder, env }) => {
    const python = join(dirname(opsight), "python");
    const output = execFileSync(python, [join(here, "record_remote_run.py"), folder], {
      env,
      cwd: folder,
      encoding: "utf8",
      timeout: 300000,
      stdio: ["ignore", "pipe", "inherit"],
    });
    return JSON.parse(output);
  });
  let page, problems, recorded;
  before(() => ({ page, problems, recorded } = session));

  test("the timeline shows the caller and one labelled process per worker with its spans", async () => {
    const { report, node_ids: nodeIds } = recorded;
    const run = report.saved_run.id;
    assert.deepEqual(
      report.backends.map((row) => [row.spec, row.error, row.node_id]),
      [
        ["nodeA/ort-cpu", null, nodeIds.nodeA],
        ["nodeB/eager", null, nodeIds.nodeB],
      ],
    );
    await openTimeline(page, `#/runs/${run}/timeline`);
    // What the server says of the run's processes...
    const processes = await page.evaluate(async (ref) => (await (await fetch(`/api/runs/${ref}/timeline`)).json()).processes, run);
    assert.equal(processes.length, 3, JSON.stringify(processes.map((process) => process.name)));
    const [caller, ...workers] = processes;
    assert.match(caller.name, /^opsight bench make \(caller, .+\)$/);
    assert.deepEqual(
      caller.tracks.map((track) => track.name),
      ["nodeA/ort-cpu", "nodeB/eager"],
      "the caller shows a track per back-end (queued, starting worker, measuring)",
    );
    for (const [index, worker] of workers.entries()) {
      const row = report.backends[index];
      assert.equal(worker.name, `worker ${index + 1}: ${row.spec}`);
      assert.equal(worker.pid, row.facts.pid);
      assert.ok(worker.labels.includes(`host ${row.facts.host}`), worker.labels.join(" | "));
      assert.ok(!worker.labels.includes(row.spec), "the spec is the name, not repeated as a label");
      assert.ok(worker.labels.includes(`node ${row.node_id.slice(0, 12)}`), worker.labels.join(" | "));
      assert.ok(
        worker.labels.some((label) => /^clock offset [+-]\d+\.\d us \(\+-\d+\.\d us\)$/.test(label)),
        worker.labels.join(" | "),
      );
      const spans = worker.tracks.reduce((total, track) => total + track.slice_count, 0);
      assert.ok(spans >= 100, `${worker.name}: ${spans} spans (100 queries measured)`);
    }
    // ...and what the page lays out and draws: a header per process carrying its labels.
    const headers = await page.evaluate(() =>
      window.opsightTimeline.layout.rows.filter((row) => row.kind === "process").map((row) => row.label),
    );
    assert.equal(headers.length, 3);
    for (const [index, worker] of workers.entries()) {
      const header = headers[index + 1];
      assert.ok(header.startsWith(`worker ${index + 1}: ${report.backends[index].spec} ${worker.pid} [`), header);
      assert.ok(header.includes(`node ${report.backends[index].node_id.slice(0, 12)}`), header);
      assert.ok(header.includes("clock offset"), header);
      // The whole header fits the canvas (not elided), so the labels can be read.
      const fits = await page.evaluate((text) => {
        const canvas = document.querySelector("canvas.timeline-canvas");
        const context = canvas.getContext("2d");
        context.font = "bold 12px system-ui, sans-serif";
        return context.measureText(text).width < canvas.getBoundingClientRect().width - 30;
      }, header);
      assert.ok(fits, `the header is wider than the timeline: ${header}`);
    }
    await screenshot(page, "remote-timeline");
    assert.deepEqual(problems, []);
  });

  test("the runs page lists the run with its many tags folded, and fits the window", async () => {
    await navigate(page, "#/runs");
    const row = page.locator("table.runs tbody tr").first();
    assert.ok((await row.textContent()).includes("remote bench"), "the run is listed by its name");
    const tags = Object.keys((await page.evaluate(async () => (await (await fetch("/api/runs")).json()).runs))[0].tags);
    assert.ok(tags.length > 12 && tags.includes("worker.1.node_id") && tags.includes("worker.2.node_id"), tags.join(" "));
    const visibleChips = () => row.locator("span.tag:visible").count();
    assert.equal(await visibleChips(), 12, "the first 12 tags are shown");
    const more = row.locator("button.tag-more");
    assert.equal(await more.textContent(), `+${tags.length - 12} more`);
    await assertFitsWindow(page, "remote-runs", { restore: { width: 1400, height: 900 } });
    await more.click();
    assert.equal(await visibleChips(), tags.length, "+N more unfolds every tag");
    assert.equal(await row.locator(`span.tag[data-key="worker.1.node_id"]`).textContent(), `worker.1.node_id=${recorded.node_ids.nodeA}×`);
    await assertFitsWindow(page, "remote-runs-unfolded", { restore: { width: 1400, height: 900 } });
    await screenshot(page, "remote-runs");
    await more.click();
    assert.equal(await visibleChips(), 12, "fewer tags folds them again");
    assert.deepEqual(problems, []);
  });
});
