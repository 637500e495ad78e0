// End to end, the timeline's reading and its shareable state, on a real run recorded here:
// `opsight run` of a Python program with a thread pool, a named thread, 24 asyncio tasks
// and the process sampler (RSS, CPU, I/O counters every 10 ms). Checks: the ruler stays put
// (the same pixels) while the tracks scroll under it, the wheel scrolls and ctrl+wheel
// zooms; the value shown on hover over a counter is the recorded sample held at that time
// (the API's points at full resolution); short asyncio tasks share a few rows; a link
// restores everything set (window, scroll, search and its current match, selection,
// range and its area's tracks, pinned and folded tracks, filter, switches) and the URL is
// left as it was; folded tracks stay folded after a reload. On a second run (a Chrome JSON
// trace of 2,500 steps with args, saved here): the search says "k of N" with N exact past
// the first page of matches, steps back from the first match to the last one, finds args;
// an area (shift+drag over one track's rows) shows per-track and per-name numbers equal to
// the API's, and a link restores them. A slice's details show its trace id, and "spans of
// this trace" searches trace:ID and finds the pool job's spans (the API's matches). Screenshots go to web/test-artifacts/.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isolatedWorld, navigate, openUi, runOpsight, screenshot } from "./harness.mjs";

const PROGRAM = `
import asyncio, threading, time
from concurrent.futures import ThreadPoolExecutor

def load_shard(index):
    time.sleep(0.004 + 0.001 * (index % 3))
    return decode_shard(index)

def decode_shard(index):
    total = 0
    for value in range(20000):
        total += value * index
    return total

async def handle(request):
    await asyncio.sleep(0.002 + 0.001 * (request % 4))
    return tokenize(request)

def tokenize(request):
    return sum(range(5000 + request))

async def serve():
    for wave in range(6):  # 24 short tasks, 4 alive at a time
        await asyncio.gather(*(handle(wave * 4 + request) for request in range(4)))

def worker_loop():
    for _ in range(10):
        decode_shard(3)
        time.sleep(0.003)

def main():
    held = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(load_shard, range(18)))
    background = threading.Thread(target=worker_loop, name="prefetcher")
    background.start()
    asyncio.run(serve())
    for _ in range(20):
        held.append(bytearray(400000))
        decode_shard(2)
        time.sleep(0.01)
    background.join()

main()
`;

const TARGETS = `targets:
${["main", "load_shard", "decode_shard", "handle", "tokenize", "serve", "worker_loop"].map((name) => `  - {module: app, function: ${name}}`).join("\n")}
`;

// Everything a user can set on the timeline, as the page shows it.
function timelineState() {
  const view = window.opsightTimeline;
  return {
    window: view.absoluteWindow(),
    scroll: view.scroll,
    selected: view.selectedRow,
    range: view.absoluteRange(),
    pinned: [...view.pinned].sort(),
    collapsed: [...view.collapsed].sort(),
    filter: view.filter,
    filterBox: document.querySelector("#track-filter").value,
    rows: view.layout.rows.map((row) => row.key),
    flows: view.showFlows,
    instants: view.showInstants,
    critical: view.criticalRows !== null,
    search: document.querySelector("#timeline-search").value,
    searchStatus: document.querySelector("#search-status").textContent,
    highlighted: view.highlightRows.size,
    sliceName: document.querySelector("#slice-name")?.textContent ?? null,
    rangeShown: document.querySelector("#range-duration")?.dataset.value ?? null,
    areaTracks: document.querySelector("#range-duration")?.dataset.tracks ?? null,
    areaNames: [...document.querySelectorAll("#area-names tbody tr")].map((row) => row.textContent),
  };
}

async function openTimeline(page, hash) {
  await navigate(page, hash);
  await page.waitForSelector("canvas.timeline-canvas[data-restored=true]", { timeout: 30000 });
  await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
}

// The canvas's pixels in a rectangle, as one string to compare.
function pixels(page, x, y, width, height) {
  return page.evaluate(
    ([x0, y0, w, h]) => {
      const canvas = document.querySelector("canvas.timeline-canvas");
      const ratio = window.devicePixelRatio || 1;
      const data = canvas.getContext("2d").getImageData(x0 * ratio, y0 * ratio, w * ratio, h * ratio).data;
      let text = "";
      for (let i = 0; i < data.length; i += 4) text += `${data[i]},${data[i + 1]},${data[i + 2]};`;
      return text;
    },
    [x, y, width, height],
  );
}

// The middle of a row's label, in page coordinates (scrolled into view first).
async function rowPoint(page, key, x) {
  const box = await page.locator("canvas.timeline-canvas").boundingBox();
  const y = await page.evaluate((wanted) => {
    const view = window.opsightTimeline;
    const row = view.layout.rows.find((candidate) => candidate.key === wanted);
    if (!row) return null;
    if (!row.pinned) view.scrollTo(row.y - view.layout.pinnedHeight);
    return view.screenY(row.y) + Math.min(row.height, 18) / 2;
  }, key);
  assert.notEqual(y, null, `row ${key} is laid out`);
  return { x: box.x + x, y: box.y + y };
}

// A Chrome JSON trace: two threads of 1,250 steps each (80 µs, args seq and shape), the
// first thread's with an op inside (30 µs, arg kind gemm or relu, half each).
function stepsTrace() {
  const events = [];
  for (let thread = 1; thread <= 2; thread += 1)
    for (let i = 0; i < 1250; i += 1) {
      const seq = (thread - 1) * 1250 + i;
      const ts = 1000 + i * 100 + thread * 7;
      events.push({ name: "step", ph: "X", ts, dur: 80, pid: 1, tid: thread, args: { seq, shape: "[8, 768]" } });
      if (thread === 1) events.push({ name: "op", ph: "X", ts: ts + 10, dur: 30, pid: 1, tid: 1, args: { kind: i % 2 ? "relu" : "gemm" } });
    }
  return JSON.stringify({ traceEvents: events });
}

describe("opsight ui: the timeline's reading, tracks and links", () => {
  let folder, env, session, page;
  const problems = [];
  let stepsRun = null;
  // The steps trace saved in the store (once); its run reference.
  async function saveSteps() {
    if (stepsRun) return stepsRun;
    writeFileSync(join(folder, "steps.json"), stepsTrace());
    runOpsight(["save", join(folder, "steps.json"), "--name", "steps"], env);
    stepsRun = "steps";
    return stepsRun;
  }

  before(async () => {
    ({ folder, env } = isolatedWorld("opsight-ui-timeline-"));
    writeFileSync(join(folder, "app.py"), PROGRAM);
    writeFileSync(join(folder, "targets.yaml"), TARGETS);
    runOpsight(["run", "-c", "targets.yaml", "--sample-ms", "10", "--report", "none", "-o", join(folder, "app.opsight"), "--", "python3", "app.py"], env, { cwd: folder });
    session = await openUi(env, problems, folder);
    ({ page } = session);
    await page.setViewportSize({ width: 1400, height: 640 }); // tracks taller than the screen
  });

  after(async () => {
    const status = await session?.close();
    assert.equal(status, 0, "opsight ui stops on SIGINT with status 0");
    assert.deepEqual(problems, [], "no dialog and no page error");
  });

  test("the ruler stays while the wheel scrolls the tracks; ctrl+wheel zooms", async () => {
    await openTimeline(page, "#/runs/1/timeline");
    const maxScroll = await page.evaluate(() => window.opsightTimeline.maxScroll());
    assert.ok(maxScroll > 100, `the tracks are taller than the canvas (${maxScroll} px to scroll)`);
    const width = await page.evaluate(() => window.opsightTimeline.viewport.width);
    const rulerBefore = await pixels(page, 200, 0, width, 23);
    const tracksBefore = await pixels(page, 200, 60, width, 200);
    const windowBefore = await page.evaluate(() => window.opsightTimeline.absoluteWindow());
    const box = await page.locator("canvas.timeline-canvas").boundingBox();
    await page.mouse.move(box.x + 700, box.y + 200);
    await page.mouse.wheel(0, 150);
    await page.waitForFunction(() => window.opsightTimeline.scroll > 0);
    await page.waitForFunction(() => document.querySelector("canvas.timeline-canvas").dataset.scroll !== "0");
    const scrolled = await page.evaluate(() => window.opsightTimeline.scroll);
    assert.equal(scrolled, 150, "the wheel scrolled the tracks by its delta");
    assert.deepEqual(await page.evaluate(() => window.opsightTimeline.absoluteWindow()), windowBefore, "scrolling leaves the window alone");
    await page.mouse.move(box.x + 5, box.y + 5); // no hover line in the pictures compared
    await page.waitForFunction(() => document.querySelector("canvas.timeline-canvas").dataset.hover === undefined);
    assert.equal(await pixels(page, 200, 0, width, 23), rulerBefore, "the ruler is drawn where it was, the same");
    assert.notEqual(await pixels(page, 200, 60, width, 200), tracksBefore, "the tracks moved under it");
    await screenshot(page, "timeline-scrolled");
    await page.waitForFunction(() => location.hash.includes("y=150"), null, { timeout: 5000 });

    await page.mouse.move(box.x + 700, box.y + 200);
    await page.keyboard.down("Control");
    await page.mouse.wheel(0, -400);
    await page.keyboard.up("Control");
    await page.waitForFunction((before) => {
      const [start, end] = window.opsightTimeline.absoluteWindow();
      return end - start < (before[1] - before[0]) * 0.8;
    }, windowBefore);
    assert.equal(await page.evaluate(() => window.opsightTimeline.scroll), 150, "ctrl+wheel zooms and does not scroll");
  });

  test("a counter's value on hover is the recorded sample held at that time", async () => {
    await openTimeline(page, "#/runs/1/timeline?tracks=process.");
    const counters = await page.evaluate(() =>
      window.opsightTimeline.layout.rows.filter((row) => row.kind === "counter").map((row) => ({ id: row.counter.id, name: row.counter.name, y: window.opsightTimeline.screenY(row.y), height: row.height })),
    );
    const rss = counters.find((counter) => counter.name === "process.rss_bytes");
    assert.ok(rss, `an RSS track among ${counters.map((counter) => counter.name)}`);
    const [start, end] = await page.evaluate(() => window.opsightTimeline.absoluteWindow());
    const resolution = Math.max(1, Math.ceil((end - start) / 60000));
    const samples = await page.evaluate(
      async ([track, from, to, step]) => (await (await fetch(`api/runs/1/counters?track=${track}&start=${from}&end=${to}&resolution=${step}`)).json()).points,
      [rss.id, start, end, resolution],
    );
    assert.ok(samples.length >= 10, `${samples.length} RSS samples`);
    assert.ok(samples.every((point) => point[2] === point[3]), "one sample per point at this resolution");
    const box = await page.locator("canvas.timeline-canvas").boundingBox();
    const width = await page.evaluate(() => window.opsightTimeline.viewport.width);
    let checked = 0;
    for (const fraction of [0.1, 0.3, 0.5, 0.7, 0.9]) {
      await page.mouse.move(box.x + 200 + width * fraction, box.y + rss.y + rss.height / 2);
      const hover = await page.waitForFunction(() => document.querySelector("canvas.timeline-canvas").dataset.hover).then((handle) => handle.jsonValue());
      const shown = JSON.parse(hover);
      const value = shown.counters.find((entry) => entry.counter === rss.id).value;
      const held = samples.filter((point) => point[0] <= shown.time).pop();
      if (!held) continue;
      assert.equal(value, held[4], `RSS at ${shown.time} is the sample of ${held[0]}`);
      checked += 1;
    }
    assert.ok(checked >= 4, `${checked} hover values checked`);
    await screenshot(page, "timeline-counter-hover");
  });

  test("short asyncio tasks share a few rows", async () => {
    await openTimeline(page, "#/runs/1/timeline");
    const packed = await page.evaluate(() =>
      window.opsightTimeline.layout.rows.filter((row) => row.kind === "packed").map((row) => row.tracks.length),
    );
    const tasks = packed.reduce((sum, count) => sum + count, 0);
    assert.ok(tasks >= 24, `${tasks} asyncio tasks packed`);
    assert.ok(packed.length < tasks / 2, `in ${packed.length} rows`);
    await screenshot(page, "timeline-packed-tasks");
  });

  test("a link restores everything set, and the URL is left as it was", async () => {
    await openTimeline(page, "#/runs/1/timeline");
    const box = await page.locator("canvas.timeline-canvas").boundingBox();
    // Pin the first thread pool worker, fold the main thread's track, filter, switches.
    const threads = await page.evaluate(() => window.opsightTimeline.layout.rows.filter((row) => row.kind === "track" && row.track.kind === "thread").map((row) => row.key));
    const pin = await rowPoint(page, threads[1], 186);
    await page.mouse.click(pin.x, pin.y);
    await page.waitForFunction((key) => window.opsightTimeline.pinned.has(key), threads[1]);
    const fold = await rowPoint(page, threads[0], 8);
    await page.mouse.click(fold.x, fold.y);
    await page.waitForFunction((key) => window.opsightTimeline.collapsed.has(key), threads[0]);
    await page.fill("#track-filter", "a"); // hides the counters without an a
    await page.uncheck("#show-flows");
    await page.check("#show-critical");
    // Search, step to the third match (it is selected and shown), then zoom, scroll, mark.
    await page.fill("#timeline-search", "decode_shard");
    await page.press("#timeline-search", "Enter");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent.startsWith("1 of"));
    await page.click("#search-next");
    await page.click("#search-next");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent.startsWith("3 of"));
    await page.focus("canvas.timeline-canvas");
    await page.keyboard.press("s");
    await page.mouse.move(box.x + 700, box.y + 150);
    await page.mouse.wheel(0, 40);
    await page.keyboard.down("Shift");
    await page.mouse.move(box.x + 420, box.y + 100);
    await page.mouse.down();
    await page.mouse.move(box.x + 640, box.y + 100, { steps: 4 });
    await page.mouse.up();
    await page.keyboard.up("Shift");
    await page.waitForSelector("#range-table");
    await page.mouse.move(box.x + 5, box.y + 5);
    await page.waitForTimeout(400); // the URL follows the window within 200 ms
    const state = await page.evaluate(timelineState);
    const link = await page.evaluate(() => location.hash);
    for (const key of ["start=", "end=", "y=", "slice=", "q=decode_shard", "match=2", "rs=", "re=", "area=", "pin=", "fold=", "tracks=a", "flows=0", "critical=1"])
      assert.ok(link.includes(key), `the link holds ${key}: ${link}`);
    assert.ok(state.scroll > 0 && state.range && state.selected !== null, JSON.stringify(state));
    await screenshot(page, "timeline-link-made");

    // The link in a fresh tab of the same size.
    const other = await page.context().newPage();
    other.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    await other.setViewportSize({ width: 1400, height: 640 });
    await other.goto(page.url().split("#")[0] + link);
    await other.waitForSelector("canvas.timeline-canvas[data-restored=true]", { timeout: 30000 });
    await other.waitForFunction(() => document.querySelector("#range-duration"));
    const restored = await other.evaluate(timelineState);
    assert.deepEqual(restored, state);
    assert.equal(await other.evaluate(() => location.hash), link, "the URL is not rewritten");
    await other.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 30000 });
    await screenshot(other, "timeline-link-restored");
    // Next goes on from the restored match.
    await other.click("#search-next");
    await other.waitForFunction(() => document.querySelector("#search-status").textContent.startsWith("4 of"));
    await other.close();
  });

  test("folded tracks stay folded after a reload, and unfold again", async () => {
    await openTimeline(page, "#/runs/1/timeline");
    const rowsBefore = await page.evaluate(() => window.opsightTimeline.layout.rows.map((row) => row.key));
    const processKey = rowsBefore.find((key) => key.startsWith("p:"));
    const header = await rowPoint(page, processKey, 40);
    await page.mouse.click(header.x, header.y);
    await page.waitForFunction((key) => window.opsightTimeline.collapsed.has(key), processKey);
    const folded = await page.evaluate(() => window.opsightTimeline.layout.rows.map((row) => row.key));
    assert.deepEqual(folded, [processKey], "a folded process shows its header only");
    await page.waitForFunction(() => location.hash.includes("fold="));
    await page.reload();
    await page.waitForSelector("canvas.timeline-canvas[data-restored=true]", { timeout: 30000 });
    assert.deepEqual(await page.evaluate(() => window.opsightTimeline.layout.rows.map((row) => row.key)), folded);
    await screenshot(page, "timeline-folded");
    const again = await rowPoint(page, processKey, 40);
    await page.mouse.click(again.x, again.y);
    await page.waitForFunction((count) => window.opsightTimeline.layout.rows.length === count, rowsBefore.length);
  });

  test("the search counts every match, steps past its first page and finds args", async () => {
    const run = await saveSteps();
    await openTimeline(page, `#/runs/${run}/timeline`);
    await page.fill("#timeline-search", "step");
    await page.press("#timeline-search", "Enter");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent === "1 of 2500");
    // Back from the first match: the last one, from a page fetched for it.
    await page.click("#search-previous");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent === "2500 of 2500");
    const last = await page.evaluate(async (ref) => (await (await fetch(`api/runs/${ref}/search?q=step&offset=2499&limit=1`)).json()).matches[0], run);
    await page.waitForFunction((row) => window.opsightTimeline.selectedRow === row, last.row);
    assert.equal(await page.textContent("#slice-name"), "step");
    await page.waitForFunction(() => location.hash.includes("match=2499"));
    // An arg's value, by key: one step; plain text finds names and arg values.
    await page.fill("#timeline-search", "arg:seq=1234");
    await page.press("#timeline-search", "Enter");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent === "1 of 1");
    // The details of the previous selection (the last step) stay until the new slice's arrive.
    await page.waitForFunction(() => document.querySelector("#slice-details .args")?.textContent.includes("1234"));
    await page.fill("#timeline-search", "gemm");
    await page.press("#timeline-search", "Enter");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent === "1 of 625");
    await screenshot(page, "timeline-search-args");
  });

  test("a slice's details name its trace, and 'spans of this trace' finds every span of it", async () => {
    await openTimeline(page, "#/runs/1/timeline");
    await page.fill("#timeline-search", "name:load_shard");
    await page.press("#timeline-search", "Enter");
    await page.waitForFunction(() => document.querySelector("#search-status").textContent.startsWith("1 of"));
    await page.waitForSelector("#slice-trace-spans");
    const traceId = await page.textContent("#slice-trace-id");
    assert.match(traceId, /^[0-9a-f]{32}$/);
    assert.match(await page.textContent("#slice-span-id"), /^[0-9a-f]{16}$/);
    await page.click("#slice-trace-spans");
    assert.equal(await page.inputValue("#timeline-search"), `trace:${traceId}`);
    await page.waitForFunction(() => / matches$/.test(document.querySelector("#search-status").textContent));
    const shown = Number(await page.evaluate(() => document.querySelector("#search-status").dataset.total));
    // The pool job's trace: its load_shard and the decode_shard it called, and each match
    // is in that trace as its details say.
    const found = await page.evaluate(async ([id]) => (await (await fetch(`api/runs/1/search?q=trace:${id}&limit=1000`)).json()), [traceId]);
    assert.equal(found.total, shown);
    const names = found.matches.map((match) => match.name);
    assert.ok(names.includes("load_shard") && names.includes("decode_shard"), names.join(", "));
    for (const match of found.matches.slice(0, 20)) {
      const detail = await page.evaluate(async (row) => (await (await fetch(`api/runs/1/slices/${row}`)).json()), match.row);
      assert.equal(detail.trace_id, traceId);
    }
    await screenshot(page, "timeline-trace-spans");
  });

  test("an area shows per track and per name what the API says, and a link restores it", async () => {
    const run = await saveSteps();
    await openTimeline(page, `#/runs/${run}/timeline`);
    const box = await page.locator("canvas.timeline-canvas").boundingBox();
    await page.focus("canvas.timeline-canvas");
    for (let i = 0; i < 6; i += 1) await page.keyboard.press("w"); // a few dozen steps wide
    const first = await page.evaluate(() => window.opsightTimeline.layout.rows.find((row) => row.kind === "track"));
    const top = await rowPoint(page, first.key, 0);
    // Shift+drag inside the first thread's rows (its two depths): the area is that track.
    await page.keyboard.down("Shift");
    await page.mouse.move(box.x + 420, top.y);
    await page.mouse.down();
    await page.mouse.move(box.x + 900, top.y + 18, { steps: 5 });
    await page.mouse.up();
    await page.keyboard.up("Shift");
    await page.waitForSelector("#area-names tbody tr");
    assert.equal(await page.evaluate(() => document.querySelector("canvas.timeline-canvas").dataset.area), String(first.track.id));
    await page.waitForFunction(() => location.hash.includes("area="));
    const query = Object.fromEntries(new URLSearchParams(await page.evaluate(() => location.hash.split("?")[1])));
    assert.equal(query.area, String(first.track.id));
    const api = await page.evaluate(
      async ([ref, start, end, tracks]) => (await (await fetch(`api/runs/${ref}/area?start=${start}&end=${end}&tracks=${tracks}&limit=50`)).json()),
      [run, query.rs, query.re, query.area],
    );
    assert.ok(api.slice_count > 10, `${api.slice_count} slices in the area`);
    const cells = (selector) =>
      page.evaluate((rowsSelector) => [...document.querySelectorAll(rowsSelector)].map((row) => [...row.cells].map((cell) => cell.dataset.value ?? cell.textContent)), selector);
    assert.deepEqual(
      await cells("#area-names tbody tr"),
      api.names.map((row) => [row.name, String(row.count), String(row.wall_ns), String(row.self_ns), String(row.average_ns)]),
      "per name: count, wall, self, average as the API gives them",
    );
    const trackCells = await cells("#area-tracks tbody tr");
    assert.deepEqual(trackCells.map((row) => row.slice(0, 3)), api.tracks.map((row) => [row.name, String(row.slice_count), String(row.busy_ns)]));
    assert.deepEqual(api.names.map((row) => row.name).sort(), ["op", "step"], "only the first thread's slices");
    await screenshot(page, "timeline-area");

    const link = await page.evaluate(() => location.hash);
    await page.reload();
    await page.waitForSelector("canvas.timeline-canvas[data-restored=true]", { timeout: 30000 });
    await page.waitForSelector("#area-names tbody tr");
    assert.equal(await page.evaluate(() => location.hash), link);
    assert.deepEqual(await cells("#area-names tbody tr"), api.names.map((row) => [row.name, String(row.count), String(row.wall_ns), String(row.self_ns), String(row.average_ns)]));
    assert.equal(await page.evaluate(() => window.opsightTimeline.areaTracks && [...window.opsightTimeline.areaTracks].join(",")), query.area);
  });
});
