// The timeline's search and area API at scale (figures in docs/performance.md): a synthetic
// run of N slices (default 10M) with two args per operator (opsight_synthetic_trace
// --args), opened by the real `opsight ui`; once the server has loaded it, each search and
// area request is timed from the client (HTTP on loopback, the JSON answer parsed), five
// times each after one warm-up; the median and the slowest are reported. A benchmark: it
// reports, it asserts nothing.
//
//   node e2e/benchmark_search.mjs [SLICES]
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { artifacts, removeFolder, repository, requireComponents, startUi, temporaryFolder } from "./harness.mjs";

const slices = Number(process.argv[2] ?? 10_000_000);
const generator = process.env.OPSIGHT_SYNTHETIC_TRACE ?? join(repository, "build/release/src/server/opsight_synthetic_trace");

requireComponents();
const folder = temporaryFolder("opsight-search-bench-");
const file = join(folder, "synthetic.opsight");
const env = { ...process.env, OPSIGHT_HOME: join(folder, "home") };
let ui;
try {
  execFileSync(generator, [String(slices), file, "--args"], { stdio: "inherit" });
  ui = await startUi([file], env);
  const base = `${ui.url.split("#")[0]}api/runs/file:0`;
  const loadStart = performance.now();
  const layout = await (await fetch(`${base}/timeline`)).json();
  const serverLoadMs = performance.now() - loadStart;
  const middle = Math.round((layout.start_ns + layout.end_ns) / 2);
  const firstTrack = layout.processes[0].tracks[0].id;
  const requests = {
    "search name (op7: 1/16 of the operators)": "/search?q=name:op7",
    "search names and arg values (768: every operator's shape)": "/search?q=768",
    "search a numeric arg (arg:seq=4242)": "/search?q=arg:seq%3D4242",
    "search, no match (zzz)": "/search?q=zzz",
    "search, the last page of most slices (op, offset total-1)": "/search?q=name:op&offset=LAST",
    "area, the whole trace, every track": `/area?start=${layout.start_ns}&end=${layout.end_ns + 1}`,
    "area, 2 ms on one track": `/area?start=${middle}&end=${middle + 2_000_000}&tracks=${firstTrack}`,
  };
  const last = (await (await fetch(`${base}/search?q=name:op&limit=1`)).json()).total - 1;
  const results = {};
  for (const [label, path] of Object.entries(requests)) {
    const url = base + path.replace("LAST", String(last));
    const times = [];
    let answer;
    for (let round = 0; round < 6; round += 1) {
      const began = performance.now();
      const response = await fetch(url);
      answer = await response.json();
      if (!response.ok) throw new Error(`${url}: ${JSON.stringify(answer)}`);
      if (round > 0) times.push(performance.now() - began);
    }
    times.sort((a, b) => a - b);
    results[label] = {
      median_ms: +times[Math.floor(times.length / 2)].toFixed(1),
      max_ms: +times[times.length - 1].toFixed(1),
      ...(answer.total !== undefined ? { total: answer.total } : { slices_in_area: answer.slice_count }),
    };
  }
  const result = { slices, server_load_ms: Math.round(serverLoadMs), requests: results };
  writeFileSync(join(artifacts, "benchmark-search.json"), JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result, null, 2));
} finally {
  await ui?.stop();
  removeFolder(folder);
}
