import { describe, expect, it } from "vitest";
import { counterUnit, counterValueAt, formatCounterValue, stepOutline, type CounterPoint } from "./counters";

describe("counter tracks", () => {
  it("reads the unit from the track or from the sampler's name", () => {
    expect(counterUnit("process.rss_bytes", "")).toBe("bytes");
    expect(counterUnit("process.net_sent_bytes_per_s", "")).toBe("bytes/s");
    expect(counterUnit("process.cpu_percent", "")).toBe("%");
    expect(counterUnit("gpu0.power_watts", "")).toBe("W");
    expect(counterUnit("queue depth", "")).toBe("");
    expect(counterUnit("anything", "requests")).toBe("requests");
  });

  it("formats values in their unit", () => {
    expect(formatCounterValue(512, "bytes")).toBe("512 B");
    expect(formatCounterValue(1536 * 1024, "bytes")).toBe("1.50 MiB");
    expect(formatCounterValue(2048, "bytes/s")).toBe("2.00 KiB/s");
    expect(formatCounterValue(97.25, "%")).toBe("97.3%");
    expect(formatCounterValue(3, "")).toBe("3");
    expect(formatCounterValue(0.123456, "W")).toBe("0.1235 W");
  });

  const points: CounterPoint[] = [
    [100, 5, 5, 5, 5],
    [200, 9, 9, 9, 9],
    [300, 2, 1, 7, 4],
  ];

  it("holds each sample's value until the next one", () => {
    expect(counterValueAt(points, 99)).toBeNull();
    expect(counterValueAt(points, 100)).toBe(5);
    expect(counterValueAt(points, 199)).toBe(5);
    expect(counterValueAt(points, 200)).toBe(9);
    expect(counterValueAt(points, 10_000)).toBe(4); // the last sample of the last pixel
  });

  it("draws steps: flat between samples, vertical at them", () => {
    const outline = stepOutline(points, (t) => t, (v) => -v, 400);
    expect(outline).toEqual([
      [100, -5],
      [100, -5],
      [200, -5], // held flat until the next sample
      [200, -9],
      [200, -9],
      [300, -9],
      [300, -2], // a pixel of many samples: first, max, min, last
      [300, -7],
      [300, -1],
      [300, -4],
      [400, -4],
    ]);
    for (let i = 1; i < outline.length; i += 1)
      expect(outline[i][0] === outline[i - 1][0] || outline[i][1] === outline[i - 1][1], `segment ${i} is flat or vertical`).toBe(true);
  });
});
