// Counter tracks' names in words, with their unit: "process.rss_bytes" reads "resident
// memory (bytes)". The table covers what opsight's recorder samples (src/collect/sampler.cc:
// the process sampler's "process.*" and each GPU's "gpuN.*"; docs/metrics.md says what
// each measures); any other name (a user's opsight.counter(), a Perfetto counter) is read
// by the same rule the core uses (src/schema/metric_names.hpp): the unit is the name's
// suffix (_ns, _bytes, _percent, _watts, _celsius, each optionally followed by _per_s),
// and the rest, its underscores and dots as spaces, is the words.

// The unit of a counter name from its suffix, as schema::metric_unit gives it.
export function metricUnit(name: string): string {
  const rate = name.length > "_per_s".length && name.endsWith("_per_s");
  const base = rate ? name.slice(0, -"_per_s".length) : name;
  for (const [suffix, unit] of UNIT_SUFFIXES)
    if (base.length > suffix.length && base.endsWith(suffix)) return rate ? `${unit}/s` : unit;
  return rate ? "/s" : "";
}

const UNIT_SUFFIXES: [string, string][] = [
  ["_ns", "ns"],
  ["_bytes", "bytes"],
  ["_percent", "percent"],
  ["_watts", "watts"],
  ["_celsius", "celsius"],
];

// What the process sampler records, by name; words and, where the bare unit would
// mislead, the unit said better.
const PROCESS_METRICS: Record<string, { words: string; unit?: string }> = {
  "process.rss_bytes": { words: "resident memory" },
  "process.cpu_percent": { words: "CPU use", unit: "% of one core" },
  "process.io_read_bytes_per_s": { words: "disk reads" },
  "process.io_write_bytes_per_s": { words: "disk writes" },
  "process.storage_read_bytes_per_s": { words: "storage device reads" },
  "process.storage_write_bytes_per_s": { words: "storage device writes" },
  "process.net_sent_bytes_per_s": { words: "network sent" },
  "process.net_received_bytes_per_s": { words: "network received" },
};

// What the GPU sampler records per device, as "gpuN.<quantity>".
const GPU_METRICS: Record<string, { words: string; unit?: string }> = {
  utilization_percent: { words: "utilization", unit: "%" },
  memory_utilization_percent: { words: "memory activity", unit: "% of the time" },
  memory_used_bytes: { words: "memory used" },
  power_watts: { words: "power" },
  temperature_celsius: { words: "temperature", unit: "°C" },
};

export interface MetricLabel {
  words: string;
  unit: string; // "" for a plain number
}

// `name` in words with its unit; `recordedUnit` (the track's own unit, when its source gave
// one) wins over the unit read from the name.
export function metricLabel(name: string, recordedUnit = ""): MetricLabel {
  const known = PROCESS_METRICS[name];
  if (known) return { words: known.words, unit: known.unit ?? (recordedUnit || metricUnit(name)) };
  const gpu = /^gpu(\d+)\.(.+)$/.exec(name);
  if (gpu && GPU_METRICS[gpu[2]]) {
    const quantity = GPU_METRICS[gpu[2]];
    return { words: `GPU ${gpu[1]} ${quantity.words}`, unit: quantity.unit ?? (recordedUnit || metricUnit(gpu[2])) };
  }
  const unit = recordedUnit || metricUnit(name);
  let words = name;
  if (name.endsWith("_per_s")) words = words.slice(0, -"_per_s".length);
  for (const [suffix] of UNIT_SUFFIXES)
    if (words.length > suffix.length && words.endsWith(suffix)) {
      words = words.slice(0, -suffix.length);
      break;
    }
  words = words.replace(/[._]+/g, " ").trim() || name;
  return { words, unit };
}

// "resident memory (bytes)", "GPU 0 power (watts)", "queue depth".
export function metricTitle(name: string, recordedUnit = ""): string {
  const label = metricLabel(name, recordedUnit);
  return label.unit ? `${label.words} (${label.unit})` : label.words;
}
