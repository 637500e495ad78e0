import { describe, expect, it } from "vitest";
import { formatTick, niceStep, rulerTicks, tickFormat } from "./ruler";

describe("the ruler's ticks", () => {
  it("steps at 1, 2 or 5 times a power of ten", () => {
    expect(niceStep(7)).toBe(10);
    expect(niceStep(130)).toBe(200);
    expect(niceStep(4e6)).toBe(5e6);
  });

  it("gives neighbouring ticks different labels at any zoom and any offset", () => {
    for (const offset of [0, 1234, 987_654_321, 12_345_678_901, 3_600_000_000_000]) {
      for (let span = 100; span <= 1e13; span *= 3.7) {
        const ticks = rulerTicks(offset, offset + span, 1200);
        expect(ticks.length).toBeGreaterThan(3);
        for (let i = 1; i < ticks.length; i += 1) expect(ticks[i].label, `${offset} + ${span}`).not.toBe(ticks[i - 1].label);
      }
    }
  });

  it("labels in the unit of the largest time, with the decimals the step needs", () => {
    expect(tickFormat(12e9, 1000)).toEqual({ scale: 1e9, unit: "s", decimals: 6 });
    expect(formatTick(12_000_001_000, tickFormat(12e9, 1000))).toBe("12.000001 s");
    expect(formatTick(2_500_000, tickFormat(3e6, 500_000))).toBe("2.5 ms");
    expect(formatTick(400, tickFormat(900, 100))).toBe("400 ns");
    expect(formatTick(20_000, tickFormat(25_000, 2000))).toBe("20 µs");
  });
});
