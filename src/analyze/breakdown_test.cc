#include "analyze/breakdown.hpp"

#include <gtest/gtest.h>

#include <string>

namespace opsight::analyze {
namespace {

// Ten inferences back to back: preprocess 10+i, h2d 5 (absent in odd ones), compute
// 100+10*i, postprocess 3; each inference lasts its children plus 7 ns no child covers.
trace::Trace inference_trace() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId infer = trace.intern("infer"), pre = trace.intern("preprocess"),
                        h2d = trace.intern("h2d"), compute = trace.intern("compute"),
                        post = trace.intern("postprocess");
  const trace::StringId host = trace.intern("host"), device = trace.intern("device");
  int64_t start = 0;
  for (int64_t i = 0; i < 10; ++i) {
    const bool copies = i % 2 == 0;
    const int64_t pre_ns = 10 + i, h2d_ns = copies ? 5 : 0, compute_ns = 100 + 10 * i, post_ns = 3;
    const int64_t total = pre_ns + h2d_ns + compute_ns + post_ns + 7;
    trace.slices.add(start, total, infer, host, track);
    int64_t cursor = start + 2;
    trace.slices.add(cursor, pre_ns, pre, host, track);
    cursor += pre_ns + 1;
    if (copies) {
      trace.slices.add(cursor, h2d_ns, h2d, device, track);
      cursor += h2d_ns + 1;
    }
    trace.slices.add(cursor, compute_ns, compute, device, track);
    cursor += compute_ns + 1;
    trace.slices.add(cursor, post_ns, post, host, track);
    start += total;
  }
  trace.finalize();
  return trace;
}

TEST(Breakdown, PhasesByChildNameWithUncoveredTime) {
  trace::Trace trace = inference_trace();
  Breakdown breakdown = compute_breakdown(trace, "infer");
  EXPECT_EQ(breakdown.inference_count, 10u);
  ASSERT_EQ(breakdown.phases.size(), 5u);
  EXPECT_EQ(breakdown.phases[0].name, "preprocess");
  EXPECT_EQ(breakdown.phases[1].name, "h2d");
  EXPECT_EQ(breakdown.phases[2].name, "compute");
  EXPECT_EQ(breakdown.phases[3].name, "postprocess");
  EXPECT_EQ(breakdown.phases[4].name, "(uncovered)");
  EXPECT_TRUE(breakdown.phases[4].uncovered);
  // compute: 100..190 step 10.
  const Distribution& compute = breakdown.phases[2].per_inference;
  EXPECT_EQ(compute.min_ns, 100);
  EXPECT_EQ(compute.max_ns, 190);
  EXPECT_DOUBLE_EQ(compute.mean_ns, 145.0);
  EXPECT_DOUBLE_EQ(compute.p50_ns, 145.0);
  EXPECT_DOUBLE_EQ(compute.p75_ns, 167.5);  // numpy: 100 + 6.75 * 10
  EXPECT_DOUBLE_EQ(compute.p90_ns, 181.0);
  // h2d in half of them: zeros count, present_in says so.
  EXPECT_EQ(breakdown.phases[1].present_in, 5u);
  EXPECT_DOUBLE_EQ(breakdown.phases[1].per_inference.mean_ns, 2.5);
  EXPECT_EQ(breakdown.phases[1].per_inference.min_ns, 0);
  // Uncovered is exactly 7 in each.
  EXPECT_EQ(breakdown.phases[4].per_inference.min_ns, 7);
  EXPECT_EQ(breakdown.phases[4].per_inference.max_ns, 7);
  // Means add up to the total's mean.
  double sum = 0;
  for (const BreakdownPhase& phase : breakdown.phases) sum += phase.per_inference.mean_ns;
  EXPECT_DOUBLE_EQ(sum, breakdown.total.mean_ns);
  // Back to back: inferences per second is 1 / mean latency.
  EXPECT_NEAR(breakdown.inferences_per_second, 1e9 / breakdown.total.mean_ns, 1e-6);
}

TEST(Breakdown, SamplesGiveEachInferencesPhasesWhoseMeansAreThePhases) {
  trace::Trace trace = inference_trace();
  BreakdownSamples samples;
  Breakdown breakdown = compute_breakdown(trace, "infer", PhaseGrouping::kChildName, &samples);
  ASSERT_EQ(samples.inferences.size(), 10u);
  ASSERT_EQ(samples.phase_values.size(), breakdown.phases.size());
  for (size_t inference = 0; inference < 10; ++inference) {
    const trace::RowIndex row = samples.inferences[inference];
    EXPECT_EQ(trace.str(trace.slices.name[row]), "infer");
    int64_t sum = 0;
    for (const auto& values : samples.phase_values) sum += values[inference];
    EXPECT_EQ(sum, trace.slices.dur[row]) << "inference " << inference;
  }
  EXPECT_EQ(samples.phase_values[1][0], 5);  // h2d in even inferences only
  EXPECT_EQ(samples.phase_values[1][1], 0);
  EXPECT_EQ(samples.phase_values[2][3], 130);  // compute 100 + 10 * i
  EXPECT_EQ(samples.phase_values[4][0], 7);    // uncovered
  for (size_t phase = 0; phase < breakdown.phases.size(); ++phase) {
    double sum = 0;
    for (int64_t value : samples.phase_values[phase]) sum += static_cast<double>(value);
    EXPECT_DOUBLE_EQ(sum / 10, breakdown.phases[phase].per_inference.mean_ns) << phase;
  }
}

TEST(Breakdown, PhasesByCategory) {
  trace::Trace trace = inference_trace();
  Breakdown breakdown = compute_breakdown(trace, "infer", PhaseGrouping::kChildCategory);
  ASSERT_EQ(breakdown.phases.size(), 3u);
  EXPECT_EQ(breakdown.phases[0].name, "host");
  EXPECT_EQ(breakdown.phases[1].name, "device");
  EXPECT_EQ(breakdown.phases[0].slices, 20u);
  // host = preprocess + postprocess: 13+i.
  EXPECT_EQ(breakdown.phases[0].per_inference.min_ns, 13);
  EXPECT_EQ(breakdown.phases[0].per_inference.max_ns, 22);
}

TEST(Breakdown, UncoveredNeverNegative) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  // A child that overflows its parent (bad input): finalize clips it; uncovered stays >= 0.
  trace.slices.add(0, 100, trace.intern("infer"), 0, track);
  trace.slices.add(10, 150, trace.intern("compute"), 0, track);
  trace.finalize();
  Breakdown breakdown = compute_breakdown(trace, "infer");
  ASSERT_EQ(breakdown.inference_count, 1u);
  EXPECT_GE(breakdown.phases.back().per_inference.min_ns, 0);
}

TEST(Breakdown, RecursionIsOneInference) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId forward = trace.intern("forward");
  trace.slices.add(0, 100, forward, 0, track);
  trace.slices.add(10, 50, forward, 0, track);  // the module calls itself
  trace.slices.add(20, 10, trace.intern("layer"), 0, track);
  trace.finalize();
  Breakdown breakdown = compute_breakdown(trace, "forward");
  EXPECT_EQ(breakdown.inference_count, 1u);
  ASSERT_EQ(breakdown.phases.size(), 2u);
  EXPECT_EQ(breakdown.phases[0].name, "forward");  // the inner call is a phase
  EXPECT_EQ(breakdown.phases[0].per_inference.max_ns, 50);
}

TEST(Breakdown, ManyDistinctPhasesMergeBeyondTheLimit) {
  // 1000 inferences, each with one child named after its request plus a common "compute".
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId infer = trace.intern("infer"), compute = trace.intern("compute");
  for (int64_t i = 0; i < 1000; ++i) {
    const int64_t start = i * 1000;
    trace.slices.add(start, 500, infer, 0, track);
    trace.slices.add(start + 1, 100, trace.intern("request " + std::to_string(i)), 0, track);
    trace.slices.add(start + 200, 200, compute, 0, track);
  }
  trace.finalize();
  Breakdown breakdown = compute_breakdown(trace, "infer");
  ASSERT_EQ(breakdown.phases.size(), kMaxBreakdownPhases + 1);  // + uncovered
  EXPECT_EQ(breakdown.phases[0].name, "request 0");  // kept phases stay in first-seen order
  EXPECT_EQ(breakdown.phases[1].name, "compute");
  const BreakdownPhase& other = breakdown.phases[kMaxBreakdownPhases - 1];
  EXPECT_EQ(other.other_phases, 1000u - (kMaxBreakdownPhases - 2));
  EXPECT_EQ(other.name, "(" + std::to_string(other.other_phases) + " other phases)");
  double sum = 0;
  for (const BreakdownPhase& phase : breakdown.phases) sum += phase.per_inference.mean_ns;
  EXPECT_DOUBLE_EQ(sum, breakdown.total.mean_ns);
}

TEST(Breakdown, ASpanOnAGpuTrackIsNotAnInference) {
  // PyTorch projects a record_function range onto the stream that ran its kernels.
  trace::Trace trace;
  trace::TrackId cpu = trace.thread_track(1, 1), stream = trace.thread_track(0, 7);
  const trace::StringId step = trace.intern("step"), annotation = trace.intern("annotation");
  trace.slices.add(0, 100, step, annotation, cpu);
  trace.slices.add(10, 20, trace.intern("cudaLaunchKernel"), trace.intern("cuda_runtime"), cpu);
  trace.slices.add(40, 50, step, annotation, stream);
  trace.slices.add(40, 50, trace.intern("gemm"), trace.intern("gpu_kernel"), stream);
  trace.finalize();
  const std::vector<trace::RowIndex> inferences = inference_slices(trace, "step");
  ASSERT_EQ(inferences.size(), 1u);
  EXPECT_EQ(trace.slices.track[inferences[0]], cpu);
  Breakdown breakdown = compute_breakdown(trace, "step");
  EXPECT_EQ(breakdown.inference_count, 1u);
  ASSERT_EQ(breakdown.phases.size(), 2u);
  EXPECT_EQ(breakdown.phases[0].name, "cudaLaunchKernel");
}

TEST(Breakdown, UnknownSpanGivesNoInferences) {
  trace::Trace trace = inference_trace();
  Breakdown breakdown = compute_breakdown(trace, "no such span");
  EXPECT_EQ(breakdown.inference_count, 0u);
  EXPECT_TRUE(breakdown.phases.empty());
}

}  // namespace
}  // namespace opsight::analyze
