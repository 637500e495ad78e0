#include "trace/trace_membership.hpp"

#include <gtest/gtest.h>

namespace opsight::trace {
namespace {

// Rows after finalize (one track): root A [0,100) > a1 [10,20) > a2 [12,15);
// root S [200,300) with a context > s1 [210,220); root B [400,500) > b1 [410,420) whose
// own context joins a remote trace > b2 [412,415).
struct TraceMembershipFixture {
  Trace trace;
  RowIndex a, a1, a2, s, s1, b, b1, b2;
  TraceMembershipFixture() {
    TrackId track = trace.thread_track(1, 1);
    StringId name = trace.intern("span");
    trace.run.trace_id = TraceId{0x11, 0x22};
    trace.slices.add(0, 100, name, 0, track);
    trace.slices.add(10, 10, name, 0, track);
    trace.slices.add(12, 3, name, 0, track);
    trace.slices.add(200, 100, name, 0, track);
    trace.slices.add(210, 10, name, 0, track);
    trace.slices.add(400, 100, name, 0, track);
    trace.slices.add(410, 10, name, 0, track);
    trace.slices.add(412, 3, name, 0, track);
    trace.span_contexts.add(3, TraceId{0xAAAA, 0xBBBB}, 0, 1);
    trace.span_contexts.add(6, TraceId{0xCCCC, 0xDDDD}, 0x1234, 0);
    trace.finalize();
    a = 0, a1 = 1, a2 = 2, s = 3, s1 = 4, b = 5, b1 = 6, b2 = 7;
  }
};

TEST(TraceMembership, ARootWithoutContextIsATraceOfItsOwn) {
  TraceMembershipFixture fixture;
  const Trace& trace = fixture.trace;
  ASSERT_EQ(trace.slices.parent[fixture.a2], fixture.a1);
  TraceMembership membership(trace);
  TraceId own = root_trace_id(trace.slices.span_id[fixture.a]);
  EXPECT_EQ(membership.trace_id(fixture.a), own);
  EXPECT_EQ(membership.trace_id(fixture.a1), own);
  EXPECT_EQ(membership.trace_id(fixture.a2), own);
  EXPECT_EQ(membership.trace_flags(fixture.a2), 1);
  EXPECT_EQ(membership.trace_index(fixture.a), membership.trace_index(fixture.a2));
  EXPECT_EQ(membership.context_of(fixture.a), -1);
  // B has no context: a trace of its own, other than A's.
  EXPECT_EQ(membership.trace_id(fixture.b), root_trace_id(trace.slices.span_id[fixture.b]));
  EXPECT_NE(membership.trace_index(fixture.b), membership.trace_index(fixture.a));
}

TEST(TraceMembership, ASpanWithAContextCarriesItsTraceToWhatItEncloses) {
  TraceMembershipFixture fixture;
  TraceMembership membership(fixture.trace);
  EXPECT_EQ(membership.trace_id(fixture.s), (TraceId{0xAAAA, 0xBBBB}));
  EXPECT_EQ(membership.trace_id(fixture.s1), (TraceId{0xAAAA, 0xBBBB}));
  EXPECT_EQ(membership.context_of(fixture.s), 0);
  // A span inside B that joined another trace: it and its child are in that trace, with
  // its flags; B itself stays in its own.
  EXPECT_EQ(membership.trace_id(fixture.b1), (TraceId{0xCCCC, 0xDDDD}));
  EXPECT_EQ(membership.trace_id(fixture.b2), (TraceId{0xCCCC, 0xDDDD}));
  EXPECT_EQ(membership.trace_flags(fixture.b2), 0);
  EXPECT_EQ(membership.context_of(fixture.b1), 1);
  EXPECT_NE(membership.trace_id(fixture.b), (TraceId{0xCCCC, 0xDDDD}));
  EXPECT_EQ(membership.trace_id_at(membership.trace_index(fixture.b2)), (TraceId{0xCCCC, 0xDDDD}));
  EXPECT_EQ(membership.row_count(), 8u);
}

TEST(TraceMembership, OneRowAgreesWithTheWholePass) {
  TraceMembershipFixture fixture;
  const Trace& trace = fixture.trace;
  TraceMembership membership(trace);
  for (RowIndex row = 0; row < trace.slices.size(); ++row) {
    RowTraceIdentity identity = TraceMembership::of_row(trace, row);
    EXPECT_EQ(identity.trace_id, membership.trace_id(row)) << row;
    EXPECT_EQ(identity.trace_flags, membership.trace_flags(row)) << row;
    EXPECT_EQ(identity.context, membership.context_of(row)) << row;
  }
  // The parent: the remote one for a span that joined a trace, none for one that began
  // a trace or a root, else the enclosing span.
  EXPECT_EQ(TraceMembership::of_row(trace, fixture.b1).parent_span_id, 0x1234u);
  EXPECT_EQ(TraceMembership::of_row(trace, fixture.s).parent_span_id, 0u);
  EXPECT_EQ(TraceMembership::of_row(trace, fixture.a).parent_span_id, 0u);
  EXPECT_EQ(TraceMembership::of_row(trace, fixture.b2).parent_span_id,
            trace.slices.span_id[fixture.b1]);
}

TEST(TraceMembership, AnEmptyTraceHasNoRows) {
  Trace trace;
  TraceMembership membership(trace);
  EXPECT_EQ(membership.row_count(), 0u);
  EXPECT_EQ(membership.trace_index_count(), 1u);  // the run's
}

}  // namespace
}  // namespace opsight::trace
