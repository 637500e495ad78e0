// End to end, the Traces page (issue 33 item 1: a run holds many traces; the UI lists and
// opens them) on a run saved here from a Chrome JSON trace: 8 "step" roots on one thread
// (one of them with an exception.type arg), 3 "request" roots with two levels of children
// on another, so 11 traces of their own. The page lists what /api/runs/RUN/traces answers,
// in its order, sorted by a header's click and filtered by root name (each time waiting for
// that answer's own state on the page, never for "some rows"), fits 1,280 px; a click on a
// trace opens the timeline with the trace's root selected, exactly its spans highlighted
// (the API's trace:ID matches) and the window on its time range. Screenshots traces-*.png.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { assertFitsWindow, navigate, runOpsight, screenshot, uiSession } from "./harness.mjs";

// 8 steps (each 300 + 40 i µs, a "forward" inside) on tid 1; 3 requests (2, 3, 4 ms, a
// "handler" > "model" inside) on tid 2, 5 ms apart.
function tracesTrace() {
  const events = [];
  for (let i = 0; i < 8; i += 1) {
    const ts = 1000 + i * 1000;
    const args = i === 5 ? { "exception.type": "ValueError" } : { step: i };
    events.push({ name: "step", ph: "X", ts, dur: 300 + 40 * i, pid: 1, tid: 1, args });
    events.push({ name: "forward", ph: "X", ts: ts + 10, dur: 200, pid: 1, tid: 1 });
  }
  for (let i = 0; i < 3; i += 1) {
    const ts = 1500 + i * 5000;
    const dur = 2000 + 1000 * i;
    events.push({ name: "request", ph: "X", ts, dur, pid: 1, tid: 2, args: { request: i } });
    events.push({ name: "handler", ph: "X", ts: ts + 50, dur: dur - 100, pid: 1, tid: 2 });
    events.push({ name: "model", ph: "X", ts: ts + 100, dur: dur / 2, pid: 1, tid: 2 });
  }
  return JSON.stringify({ traceEvents: events });
}

async function api(page, path) {
  return page.evaluate(async (url) => {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    return response.json();
  }, path);
}

// The trace ids of the table's rows, in order.
function shownTraceIds(page) {
  return page.evaluate(() => [...document.querySelectorAll("#traces-table tbody tr")].map((row) => row.dataset.traceId));
}

describe("opsight ui: a run's traces, listed and opened", () => {
  const session = uiSession("opsight-ui-traces-", async ({ folder, env }) => {
    writeFileSync(join(folder, "traces.json"), tracesTrace());
    runOpsight(["save", join(folder, "traces.json"), "--name", "traces"], env);
  });

  test("the Traces page lists the API's traces, sorts, filters, and a click opens one on the timeline", async () => {
    const { page } = session;
    await page.setViewportSize({ width: 1400, height: 900 });
    await navigate(page, "#/runs/traces/traces");
    await page.waitForSelector("#traces-listing[data-sort=duration][data-order=desc] #traces-table");
    const slowest = await api(page, "api/runs/traces/traces?limit=50");
    assert.equal(slowest.total, 11, "8 steps and 3 requests, each a trace of its own");
    assert.deepEqual(await shownTraceIds(page), slowest.traces.map((row) => row.trace_id));
    assert.equal(slowest.traces[0].root_name, "request", "the slowest first");
    assert.equal(slowest.traces[0].span_count, 3);
    assert.equal(await page.getAttribute("#traces-status", "data-matched"), "11");
    const failed = slowest.traces.filter((row) => row.error_count > 0);
    assert.deepEqual(failed.map((row) => [row.root_name, row.error_count]), [["step", 1]], "the step an exception left");
    await assertFitsWindow(page, "traces", { restore: { width: 1400, height: 900 } });
    await screenshot(page, "traces-list");

    // Sorted by start: the table follows the API's order for it.
    await page.click("#traces-table th[data-sort=start]");
    await page.waitForSelector("#traces-listing[data-sort=start][data-order=asc] #traces-table");
    const byStart = await api(page, "api/runs/traces/traces?limit=50&sort=start&order=asc");
    assert.deepEqual(await shownTraceIds(page), byStart.traces.map((row) => row.trace_id));
    assert.ok(page.url().includes("sort=start"), page.url());

    // Filtered by the root's name.
    await page.fill("#traces-filter", "request");
    await page.press("#traces-filter", "Enter");
    await page.waitForSelector("#traces-listing[data-q=request] #traces-table");
    const requests = await api(page, "api/runs/traces/traces?limit=50&sort=start&order=asc&q=request");
    assert.equal(requests.matched, 3);
    assert.deepEqual(await shownTraceIds(page), requests.traces.map((row) => row.trace_id));
    assert.equal(await page.getAttribute("#traces-status", "data-matched"), "3");

    // Open the last request's trace (the slowest: 4 ms).
    const opened = requests.traces[2];
    assert.equal(opened.duration_ns, 4_000_000);
    await page.click(`#traces-table tr[data-trace-id="${opened.trace_id}"] a.trace-link`);
    await page.waitForSelector("body[data-page=timeline][data-ready=true]", { timeout: 30000 });
    await page.waitForSelector("canvas.timeline-canvas[data-restored=true]", { timeout: 30000 });
    await page.waitForFunction((id) => document.querySelector("#slice-trace-id")?.textContent === id, opened.trace_id);
    assert.equal(await page.textContent("#slice-name"), "request");

    // Its root selected, its spans (the API's trace:ID matches, all 3) highlighted, the
    // search box saying so, the window on the trace's range.
    const matches = await api(page, `api/runs/traces/search?q=trace:${opened.trace_id}&limit=1000`);
    assert.equal(matches.total, opened.span_count);
    await page.waitForFunction((total) => document.querySelector("#search-status")?.dataset.total === String(total), opened.span_count);
    assert.equal(await page.inputValue("#timeline-search"), `trace:${opened.trace_id}`);
    const view = await page.evaluate(() => ({
      selected: window.opsightTimeline.selectedRow,
      highlighted: [...window.opsightTimeline.highlightRows].sort((a, b) => a - b),
      window: window.opsightTimeline.absoluteWindow(),
    }));
    assert.equal(view.selected, opened.root_row);
    assert.deepEqual(view.highlighted, matches.matches.map((match) => match.row).sort((a, b) => a - b));
    const margin = opened.duration_ns * 0.05;
    assert.ok(Math.abs(view.window[0] - (opened.start_ns - margin)) <= 1, `window ${view.window} starts 5% before the trace (${opened.start_ns})`);
    assert.ok(Math.abs(view.window[1] - (opened.end_ns + margin)) <= 1, `window ${view.window} ends 5% after the trace (${opened.end_ns})`);
    await screenshot(page, "traces-opened");
  });
});
