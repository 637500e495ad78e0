/// <reference types="vite/client" />
// The metric names' table is checked against the recorder's source: every counter name
// src/collect/sampler.cc writes must read as words (no underscores, no dotted source
// prefix) with the unit of its suffix, so a newly sampled metric cannot show raw.
import { expect, test } from "vitest";
import sampler from "../../src/collect/sampler.cc?raw";
import { metricLabel, metricTitle, metricUnit } from "./metric_names";

// The names the sampler writes: "process.*" literally, and "gpu{}.QUANTITY" per device.
function recordedNames(): string[] {
  const process = [...sampler.matchAll(/"(process\.[a-z_]+)"/g)].map((match) => match[1]);
  const gpu = [...sampler.matchAll(/record\("([a-z_]+)"/g)].map((match) => `gpu0.${match[1]}`);
  return [...process, ...gpu];
}

test("every counter the recorder samples reads as words with its unit", () => {
  const names = recordedNames();
  expect(names.length).toBeGreaterThanOrEqual(13); // 8 process counters and 5 per GPU today
  for (const name of names) {
    const label = metricLabel(name);
    expect(label.words, name).not.toMatch(/[_.]|process|gpu0/);
    expect(label.unit, name).not.toBe("");
    // A table entry's unit says the same as the name's suffix, or says it better.
    const fromName = metricUnit(name);
    const same = label.unit === fromName || (fromName === "percent" && label.unit.includes("%")) || (fromName === "celsius" && label.unit === "°C");
    expect(same, `${name}: ${label.unit} vs ${fromName}`).toBe(true);
  }
  expect(new Set(names.map((name) => metricTitle(name))).size, "no two metrics read alike").toBe(names.length);
});

test("the recorder's metrics in words", () => {
  expect(metricTitle("process.rss_bytes")).toBe("resident memory (bytes)");
  expect(metricTitle("process.io_read_bytes_per_s")).toBe("disk reads (bytes/s)");
  expect(metricTitle("process.cpu_percent")).toBe("CPU use (% of one core)");
  expect(metricTitle("gpu1.power_watts")).toBe("GPU 1 power (watts)");
  expect(metricTitle("gpu0.temperature_celsius")).toBe("GPU 0 temperature (°C)");
});

test("an unknown name reads by the core's suffix rule", () => {
  expect(metricUnit("queue.wait_ns")).toBe("ns");
  expect(metricUnit("cache.fill_bytes_per_s")).toBe("bytes/s");
  expect(metricUnit("requests_per_s")).toBe("/s");
  expect(metricUnit("depth")).toBe("");
  expect(metricUnit("_bytes")).toBe(""); // a suffix alone is a name, not a unit
  expect(metricTitle("llm.kv_cache_bytes")).toBe("llm kv cache (bytes)");
  expect(metricTitle("server.queue_depth")).toBe("server queue depth");
  expect(metricTitle("requests_per_s")).toBe("requests (/s)");
  // The track's own unit (a Perfetto counter's) wins over the name's.
  expect(metricTitle("Frequency cpu0", "Hz")).toBe("Frequency cpu0 (Hz)");
  expect(metricTitle("gpu3.fan_speed")).toBe("gpu3 fan speed");
});
