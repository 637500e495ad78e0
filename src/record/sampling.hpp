// Sampling by unit: the recorder's side of SessionOptions::sample_rate (opsight.hpp).
//
// A sampling unit is a root span (the first span a track begins with none open), or, with
// a root name, a span of that name begun outside any unit. When a unit begins it is
// decided, once: recorded, or sampled out. A sampled-out unit records nothing until it
// ends: its root's begin returns true without writing (so the front end calls end() for
// it), every begin inside returns false (so no end comes for them), and recording() is
// false, so arguments, instants and flows are not written either. The next end() of the
// track is the root's: the unit closes.
//
// Decisions are exact and spread evenly (unit k of the process is recorded when
// ceil((k+1)·rate) > ceil(k·rate): the first unit, then one in every 1/rate), unless the
// front end said what the next unit on this track is (decide_next_unit: the sampled flag
// of a caller's W3C traceparent, a parent process's decision), which is followed and
// counted too. The state is per track, so asyncio tasks interleaved on one thread each
// keep their own; a listener (the torch operator observer) hears when the calling thread
// enters and leaves a sampled-out unit, to switch its own hooks off meanwhile. With
// operators_only (an always-on preset: Python spans always, operators for a sample), that
// is all sampling does: the unit's spans are recorded, its operators are not.
//
// Thread-safety: configure() and run_info() run under the session lock; everything else
// concerns the calling thread, and the counters are atomics.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "opsight/opsight.hpp"

namespace opsight::record::sampling {

// Sets the policy of the session starting (rate >= 1: no sampling); resets the counters and
// makes every thread's state stale. With `operators_only`, a unit sampled out is recorded
// with only the listener's hooks off (the torch operators): its spans are written.
void configure(double rate, const std::string& root, bool operators_only = false);
// Switches sampling off (the session stopped).
void clear();
// What the run info says of sampling: "sampling" (the policy, in words), and the units
// seen and recorded; empty when the session did not sample.
std::vector<std::pair<std::string, std::string>> run_info();
// A front end switched the calling thread to track `key` (switch_track).
void on_switch_track(uint64_t key);

}  // namespace opsight::record::sampling
