import { expect, test } from "vitest";
import { formatBytes, formatDuration, formatShare, formatUnixTime } from "./format";

test("durations read as the reports print them", () => {
  expect(formatDuration(812)).toBe("812 ns");
  expect(formatDuration(12.5)).toBe("12.5 ns");
  expect(formatDuration(12_400)).toBe("12.4 µs");
  expect(formatDuration(3_210_000)).toBe("3.21 ms");
  expect(formatDuration(968_000_000)).toBe("968 ms");
  expect(formatDuration(4_005_000_000)).toBe("4.005 s");
  expect(formatDuration(-384_000_000)).toBe("-384 ms");
});

test("shares, bytes and times", () => {
  expect(formatShare(0.625)).toBe("62.5%");
  expect(formatShare(0.00001)).toBe("<0.1%");
  expect(formatBytes(512)).toBe("512 B");
  expect(formatBytes(12 * 1024 * 1024)).toBe("12.0 MiB");
  expect(formatUnixTime(0)).toBe("");
  expect(formatUnixTime(1_700_000_000_000_000_000)).toBe("2023-11-14 22:13:20");
});
