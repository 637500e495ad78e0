// Numbers as the reports print them (src/report's format_duration and format_share), so
// the UI and `opsight report` read alike.

export function formatDuration(nanoseconds: number): string {
  const value = Math.abs(nanoseconds);
  const sign = nanoseconds < 0 ? "-" : "";
  if (value < 1000) return sign + (Number.isInteger(value) ? `${value} ns` : `${value.toFixed(1)} ns`);
  if (value < 1e6) return sign + `${threeDigits(value / 1e3)} µs`;
  if (value < 1e9) return sign + `${threeDigits(value / 1e6)} ms`;
  return sign + `${(value / 1e9).toFixed(3)} s`;
}

// Three significant digits without an exponent ("1.23", "12.3", "123").
function threeDigits(value: number): string {
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

export function formatShare(fraction: number): string {
  if (fraction > 0 && fraction < 0.001) return "<0.1%";
  return `${(fraction * 100).toFixed(1)}%`;
}

export function formatCount(count: number): string {
  return count.toLocaleString("en-US");
}

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

// A Unix time in ns as "2026-11-25 20:21:18" (UTC).
export function formatUnixTime(unixNs: number): string {
  if (!unixNs) return "";
  return new Date(unixNs / 1e6).toISOString().replace("T", " ").slice(0, 19);
}
