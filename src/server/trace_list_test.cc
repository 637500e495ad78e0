#include "server/trace_list.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "server/server_test_fixtures.hpp"
#include "server/trace_cache.hpp"
#include "trace/trace_membership.hpp"

namespace opsight::server {
namespace {

using testing::kManyTracesBegun;
using testing::kManyTracesCaller;
using testing::many_traces_trace;

std::string trace_list_root_name(const trace::Trace& trace, const TraceListRow& row) {
  return std::string(trace.str(trace.slices.name[row.root]));
}

// The root names of a page, in its order ("step@1000": a name and its root's start).
std::vector<std::string> trace_list_page_roots(const trace::Trace& trace,
                                               const TraceListPage& page) {
  std::vector<std::string> names;
  for (const TraceListRow* row : page.rows)
    names.push_back(trace_list_root_name(trace, *row) + "@" +
                    std::to_string(trace.slices.ts[row->root]));
  return names;
}

TEST(TraceList, EveryTraceOnceWithItsRootTimesCountsAndProcesses) {
  const trace::Trace trace = many_traces_trace();
  const TraceList list(trace);
  ASSERT_EQ(list.size(), 6u);
  std::map<std::string, const TraceListRow*> by_root;
  for (const TraceListRow& row : list.rows())
    by_root[trace_list_root_name(trace, row) + "@" + std::to_string(trace.slices.ts[row.root])] =
        &row;
  ASSERT_EQ(by_root.size(), 6u);

  // A root span that joined no trace: a trace of its own, its children in it.
  const TraceListRow& step = *by_root.at("step@1000");
  EXPECT_EQ(step.trace_id, trace::root_trace_id(trace.slices.span_id[step.root]));
  EXPECT_EQ(step.span_count, 2u);
  EXPECT_EQ(step.error_count, 1u);  // the forward that an exception left
  EXPECT_EQ(step.start_ns, 1000);
  EXPECT_EQ(step.duration_ns(), 10000);
  EXPECT_EQ(step.root_count, 1u);
  EXPECT_EQ(step.process_count, 1u);
  EXPECT_EQ(step.remote_parent_span_id, 0u);
  EXPECT_EQ(by_root.at("step@20000")->error_count, 0u);

  // Two requests served for one caller's trace: one trace, from the first request's begin
  // to the second's end, over both processes, rooted at the first with its remote parent.
  const TraceListRow& caller = *by_root.at("GET /predict@5000");
  EXPECT_EQ(by_root.count("GET /predict@60000"), 0u);
  EXPECT_EQ(caller.trace_id, kManyTracesCaller);
  EXPECT_EQ(caller.span_count, 4u);
  EXPECT_EQ(caller.error_count, 1u);  // handler's error.type 500
  EXPECT_EQ(caller.start_ns, 5000);
  EXPECT_EQ(caller.end_ns, 62000);
  EXPECT_EQ(caller.root_count, 2u);
  EXPECT_EQ(caller.process_count, 2u);
  EXPECT_EQ(caller.remote_parent_span_id, 0x1122334455667788u);

  // A span that began a trace inside a root: the trace's root; the root keeps its own.
  const TraceListRow& begun = *by_root.at("call@70010");
  EXPECT_EQ(begun.trace_id, kManyTracesBegun);
  EXPECT_EQ(begun.span_count, 1u);
  EXPECT_EQ(begun.remote_parent_span_id, 0u);
  EXPECT_EQ(by_root.at("batch@70000")->span_count, 1u);

  // Each trace holds exactly the spans TraceMembership puts in it (what trace:ID finds).
  const trace::TraceMembership membership(trace);
  for (const TraceListRow& row : list.rows()) {
    uint32_t spans = 0;
    for (trace::RowIndex slice = 0; slice < trace.slices.size(); ++slice)
      spans += membership.trace_id(slice) == row.trace_id ? 1 : 0;
    EXPECT_EQ(spans, row.span_count) << row.trace_id.to_hex();
  }
}

TEST(TraceList, SortsPagesAndFiltersByRootName) {
  const trace::Trace trace = many_traces_trace();
  const TraceList list(trace);
  TraceListQuery query;  // duration, longest first
  EXPECT_EQ(trace_list_page_roots(trace, list.page(query)),
            (std::vector<std::string>{"GET /predict@5000", "step@1000", "step@20000", "job@8000",
                                      "batch@70000", "call@70010"}));
  query.descending = false;
  EXPECT_EQ(trace_list_page_roots(trace, list.page(query)).front(), "call@70010");
  query = {};
  query.sort = TraceSort::kStart;
  query.descending = false;
  EXPECT_EQ(trace_list_page_roots(trace, list.page(query)),
            (std::vector<std::string>{"step@1000", "GET /predict@5000", "job@8000", "step@20000",
                                      "batch@70000", "call@70010"}));
  // Most spans first; ties (2 and 2, then 1, 1, 1) by earlier start.
  query.sort = TraceSort::kSpans;
  query.descending = true;
  EXPECT_EQ(trace_list_page_roots(trace, list.page(query)),
            (std::vector<std::string>{"GET /predict@5000", "step@1000", "step@20000", "job@8000",
                                      "batch@70000", "call@70010"}));
  query.sort = TraceSort::kName;
  query.descending = false;
  EXPECT_EQ(trace_list_page_roots(trace, list.page(query)).front(), "GET /predict@5000");

  // Paging: [offset, offset + limit) of the order, the count of all of it.
  query = {};
  query.offset = 2;
  query.limit = 3;
  TraceListPage page = list.page(query);
  EXPECT_EQ(page.matched, 6u);
  EXPECT_EQ(trace_list_page_roots(trace, page),
            (std::vector<std::string>{"step@20000", "job@8000", "batch@70000"}));
  query.offset = 6;
  EXPECT_TRUE(list.page(query).rows.empty());

  // The filter: roots whose name contains the (lowercased) text, then paged.
  query = {};
  query.root_name = "step";
  query.offset = 1;
  page = list.page(query);
  EXPECT_EQ(page.matched, 2u);
  EXPECT_EQ(trace_list_page_roots(trace, page), (std::vector<std::string>{"step@20000"}));
  query = {};
  query.root_name = "get /pre";
  EXPECT_EQ(list.page(query).matched, 1u);
  query.root_name = "nothing";
  EXPECT_EQ(list.page(query).matched, 0u);
}

TEST(TraceList, AnEmptyRunHasNoTraces) {
  trace::Trace trace;
  trace.finalize();
  const TraceList list(trace);
  EXPECT_EQ(list.size(), 0u);
  EXPECT_EQ(list.page({}).matched, 0u);
}

TEST(TraceList, ALoadedRunBuildsItsListOnceAndKeepsIt) {
  const LoadedRun run(many_traces_trace(), "many", {});
  const TraceList& first = run.traces();
  EXPECT_EQ(&first, &run.traces());
  EXPECT_EQ(first.size(), 6u);
}

}  // namespace
}  // namespace opsight::server
