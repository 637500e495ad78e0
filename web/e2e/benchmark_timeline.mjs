// The timeline at scale (make bench-ui; figures in docs/performance.md): a synthetic run of
// N slices (default 10M) written by opsight_synthetic_trace, opened by the real `opsight
// ui`; once the server has loaded it (timed apart), Chromium opens the timeline and the
// Performance API gives the first complete drawing (mark "opsight-first-draw", from
// navigation start); then W/A/S/D are held in turns, ctrl+wheel zooms and the wheel scrolls
// the tracks, and every frame's drawing time is measured ("opsight-frame" measures). A
// benchmark: it reports, it asserts nothing.
//
//   node e2e/benchmark_timeline.mjs [SLICES]
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { artifacts, launchBrowser, removeFolder, repository, requireComponents, startUi, temporaryFolder } from "./harness.mjs";

const slices = Number(process.argv[2] ?? 10_000_000);
const generator = process.env.OPSIGHT_SYNTHETIC_TRACE ?? join(repository, "build/release/src/server/opsight_synthetic_trace");

function percentile(sorted, q) {
  if (!sorted.length) return NaN;
  const index = (q / 100) * (sorted.length - 1);
  const low = Math.floor(index);
  const high = Math.min(sorted.length - 1, low + 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (index - low);
}

requireComponents();
const folder = temporaryFolder("opsight-ui-bench-");
const file = join(folder, "synthetic.opsight");
const env = { ...process.env, OPSIGHT_HOME: join(folder, "home") };
let ui, browser;
try {
  execFileSync(generator, [String(slices), file], { stdio: "inherit" });
  ui = await startUi([file], env);
  const base = ui.url.split("#")[0];
  const loadStart = performance.now();
  const layout = await (await fetch(`${base}api/runs/file:0/timeline`)).json();
  const serverLoadMs = performance.now() - loadStart;
  browser = await launchBrowser();
  const page = await browser.context.newPage();
  await page.goto(`${base}#/runs/file:0/timeline`);
  await page.waitForSelector("canvas.timeline-canvas[data-complete=true]", { timeout: 60000 });
  const firstDrawMs = await page.evaluate(() => performance.getEntriesByName("opsight-first-draw")[0].startTime);
  await page.screenshot({ path: join(artifacts, "benchmark-timeline.png") });

  // Pan and zoom: each key held 700 ms, ctrl+wheel turned (zoom), the wheel turned (scroll),
  // twice over.
  await page.evaluate(() => window.opsightTimeline.frameTimes.splice(0));
  await page.focus("canvas.timeline-canvas");
  const box = await page.locator("canvas.timeline-canvas").boundingBox();
  for (let round = 0; round < 2; round += 1) {
    for (const key of ["w", "w", "d", "s", "a", "w", "d"]) {
      await page.keyboard.down(key);
      await page.waitForTimeout(700);
      await page.keyboard.up(key);
    }
    await page.mouse.move(box.x + 600, box.y + 100);
    await page.keyboard.down("Control");
    for (let turn = 0; turn < 20; turn += 1) {
      await page.mouse.wheel(0, turn < 10 ? -120 : 120);
      await page.waitForTimeout(30);
    }
    await page.keyboard.up("Control");
    for (let turn = 0; turn < 10; turn += 1) {
      await page.mouse.wheel(0, turn < 5 ? 60 : -60);
      await page.waitForTimeout(30);
    }
  }
  const frames = await page.evaluate(() => window.opsightTimeline.frameTimes.slice());
  const sorted = [...frames].sort((a, b) => a - b);
  const trackCount = layout.processes.reduce((sum, process) => sum + process.tracks.length + process.counters.length, 0);
  const result = {
    slices,
    tracks: trackCount,
    server_load_ms: Math.round(serverLoadMs),
    first_draw_ms: Math.round(firstDrawMs),
    frames: frames.length,
    frame_median_ms: +percentile(sorted, 50).toFixed(2),
    frame_p95_ms: +percentile(sorted, 95).toFixed(2),
    frame_max_ms: +sorted[sorted.length - 1].toFixed(2),
    chromium: await browser.context.browser()?.version?.() ?? "chromium",
  };
  writeFileSync(join(artifacts, "benchmark-timeline.json"), JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result, null, 2));
} finally {
  await browser?.close();
  await ui?.stop();
  removeFolder(folder);
}
