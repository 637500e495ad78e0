// W3C trace context: traceparent headers parsed and written by the specification's rules,
// and the events that tie recorded spans to a remote trace (join_remote_trace) or give a
// span the id a callee was sent (set_span_id), read back, kept by the native model writer
// and by a merge.
#include <gtest/gtest.h>

#include <functional>

#include "io/io.hpp"
#include "opsight/opsight.hpp"
#include "record/record_and_read_for_tests.hpp"
#include "record/recorder.hpp"
#include "trace/trace.hpp"

namespace {

using opsight::TraceContext;
using opsight::trace::kNoRow;
using opsight::trace::RowIndex;
using opsight::trace::Trace;

TEST(Traceparent, ParsesTheSpecificationsExampleAndWritesItBack) {
  auto context =
      opsight::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(context->trace_id_high, 0x4bf92f3577b34da6ULL);
  EXPECT_EQ(context->trace_id_low, 0xa3ce929d0e0e4736ULL);
  EXPECT_EQ(context->span_id, 0x00f067aa0ba902b7ULL);
  EXPECT_EQ(context->trace_flags, 1);
  EXPECT_EQ(opsight::format_traceparent(*context),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_TRUE(
      opsight::parse_traceparent(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\t"));
}

TEST(Traceparent, RefusesWhatTheSpecificationRefusesAndReadsLaterVersions) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero span id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 has 4 fields
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
       })
    EXPECT_FALSE(opsight::parse_traceparent(bad).has_value()) << bad;
  auto later = opsight::parse_traceparent(
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever");
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->span_id, 0x00f067aa0ba902b7ULL);
}

using opsight::record::testing::record_and_read;
using opsight::record::testing::row_named;

// A request served without a traceparent: its span begins a trace of its own, a new one
// per request, as the root (no parent span); spans under it are in that trace.
TEST(TraceContextEvents, EachRequestWithoutACallerBeginsATraceOfItsOwn) {
  TraceContext first{}, second{};
  Trace trace = record_and_read([&] {
    {
      opsight::Span request(std::string("GET /a"));
      first = opsight::begin_trace();
      opsight::Span inner(std::string("inner"));
    }
    {
      opsight::Span request(std::string("GET /b"));
      second = opsight::begin_trace();
    }
  });
  EXPECT_EQ(opsight::begin_trace().trace_id_low | opsight::begin_trace().trace_id_high, 0u)
      << "no session: nothing begun";
  ASSERT_EQ(trace.span_contexts.size(), 2u);
  RowIndex a = row_named(trace, "GET /a"), b = row_named(trace, "GET /b");
  EXPECT_EQ(trace.span_contexts.slice[0], a);
  EXPECT_EQ(trace.span_contexts.slice[1], b);
  EXPECT_EQ(trace.span_contexts.trace_id[0].high, first.trace_id_high);
  EXPECT_EQ(trace.span_contexts.trace_id[0].low, first.trace_id_low);
  EXPECT_EQ(trace.span_contexts.trace_id[1].low, second.trace_id_low);
  EXPECT_NE(trace.span_contexts.trace_id[0], trace.span_contexts.trace_id[1]);
  EXPECT_NE(trace.span_contexts.trace_id[0], trace.run.trace_id);
  EXPECT_EQ(trace.span_contexts.parent_span_id[0], 0u);  // a root: no parent, local or remote
  EXPECT_EQ(trace.span_contexts.trace_flags[0], 1u);
}

// A call made outside any request served: the root of what is open on the thread (not the
// innermost span, where the call is made) stays in the session's trace, once however many
// calls it makes; a root that makes none is left to be a trace of its own.
TEST(TraceContextEvents, ACallOutsideAServedRequestKeepsItsRootInTheSessionsTrace) {
  TraceContext joined{}, again{}, session{};
  Trace trace = record_and_read([&] {
    {
      opsight::Span batch(std::string("batch"));
      opsight::Span item(std::string("item"));
      opsight::Span call(std::string("POST /score"));
      joined = opsight::join_session_trace();
      again = opsight::join_session_trace();
      session = opsight::session_trace_id();
    }
    opsight::Span alone(std::string("alone"));
  });
  EXPECT_EQ(opsight::join_session_trace().trace_id_low, 0u) << "no session: nothing joined";
  EXPECT_EQ(joined.trace_id_high, session.trace_id_high);
  EXPECT_EQ(joined.trace_id_low, session.trace_id_low);
  EXPECT_EQ(again.trace_id_low, session.trace_id_low);
  ASSERT_EQ(trace.span_contexts.size(), 1u) << "one context for the root, however many calls";
  EXPECT_EQ(trace.span_contexts.slice[0], row_named(trace, "batch"));
  EXPECT_EQ(trace.span_contexts.trace_id[0], trace.run.trace_id);
  EXPECT_EQ(trace.span_contexts.parent_span_id[0], 0u);
  // Kept by the native model writer: the context is read back on the root.
  auto again_read = opsight::io::read_native(opsight::io::write_native(trace));
  ASSERT_TRUE(again_read.ok());
  ASSERT_EQ(again_read.trace.span_contexts.size(), 1u);
  EXPECT_EQ(again_read.trace.span_contexts.slice[0], row_named(again_read.trace, "batch"));
}

TEST(TraceContextEvents, AServerSpanJoinsTheCallersTraceAndAClientSpanKeepsTheIdItSent) {
  const TraceContext remote{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL, 0x00f067aa0ba902b7ULL, 1};
  uint64_t sent_id = 0;
  TraceContext during{};
  Trace trace = record_and_read([&] {
    during = opsight::session_trace_id();
    opsight::Span request(std::string("GET /predict"));
    opsight::join_remote_trace(remote);
    {
      opsight::Span call(std::string("POST /backend"));
      sent_id = opsight::new_flow_id();
      opsight::set_span_id(sent_id);
    }
  });
  EXPECT_NE(during.trace_id_high | during.trace_id_low, 0u);
  EXPECT_EQ(opsight::session_trace_id().trace_id_low, 0u);  // no session any more
  EXPECT_EQ(trace.run.trace_id.high, during.trace_id_high);
  EXPECT_EQ(trace.run.trace_id.low, during.trace_id_low);

  RowIndex request = row_named(trace, "GET /predict");
  RowIndex call = row_named(trace, "POST /backend");
  ASSERT_NE(request, kNoRow);
  ASSERT_NE(call, kNoRow);
  ASSERT_EQ(trace.span_contexts.size(), 1u);
  EXPECT_EQ(trace.span_contexts.slice[0], request);
  EXPECT_EQ(trace.span_contexts.trace_id[0].high, remote.trace_id_high);
  EXPECT_EQ(trace.span_contexts.trace_id[0].low, remote.trace_id_low);
  EXPECT_EQ(trace.span_contexts.parent_span_id[0], remote.span_id);
  EXPECT_EQ(trace.span_contexts.trace_flags[0], 1);
  EXPECT_EQ(trace.slices.span_id[call], sent_id);
  EXPECT_TRUE(trace.slices.flags[call] & opsight::trace::kSliceExplicitSpanId);

  // Kept by the model writer, and by a merge behind another trace's rows.
  auto again = opsight::io::read_native(opsight::io::write_native(trace));
  ASSERT_TRUE(again.ok());
  RowIndex request_again = row_named(again.trace, "GET /predict");
  ASSERT_EQ(again.trace.span_contexts.size(), 1u);
  EXPECT_EQ(again.trace.span_contexts.slice[0], request_again);
  EXPECT_EQ(again.trace.span_contexts.parent_span_id[0], remote.span_id);
  EXPECT_EQ(again.trace.slices.span_id[row_named(again.trace, "POST /backend")], sent_id);
  Trace merged = record_and_read([] { opsight::Span other(std::string("other")); });
  opsight::trace::append_trace(merged, trace);
  ASSERT_EQ(merged.span_contexts.size(), 1u);
  EXPECT_EQ(merged.str(merged.slices.name[merged.span_contexts.slice[0]]), "GET /predict");
}

TEST(TraceContextEvents, WithoutAnOpenSpanTheyAreCountedNotShown) {
  Trace trace = record_and_read([] {
    opsight::join_remote_trace({1, 2, 3, 1});
    opsight::set_span_id(99);
  });
  EXPECT_EQ(trace.span_contexts.size(), 0u);
  bool counted = false;
  for (const auto& [key, value] : trace.run.extra)
    if (key == "trace_contexts_without_span") counted = value == "2";
  EXPECT_TRUE(counted);
}

}  // namespace
