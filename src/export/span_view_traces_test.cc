// Which trace each span is exported in: a root span that joined no trace is the root of a
// trace of its own (trace::root_trace_id), a span that joined or began one is in it with
// what is under it, and a root that called join_session_trace stays in the session's. The
// whole-file path (SpanView over the reader's trace) and the live path (NativeTail's ended
// spans) must give every span the same trace: the same span is sent by both.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "export/span_view.hpp"
#include "io/io.hpp"
#include "io/native/native_tail.hpp"
#include "io/native/native_test_files.hpp"

namespace {

using namespace opsight::io::native_test_files;
using opsight::trace::TraceId;

constexpr uint64_t kRunHalf = 0x0123456789abcdefULL;  // the file's trace id, both halves
constexpr const char* kRunTraceHex = "0123456789abcdef0123456789abcdef";

// Two threads: roots with children, a root that keeps the session's trace (joined from a
// grandchild), a request served inside a root (begin_trace) with a child, a span joined
// to a caller's trace, a root given its id by the program, and an async span.
std::string traces_file() {
  ThreadEvents first{
      0, 7, 8,
      concat({
          {slot(100, SlotKind::kBegin, 1)},  // A: a root
          {slot(110, SlotKind::kBegin, 1)},
          {slot(115, SlotKind::kBegin, 1)},
          span_context(0, kRunHalf, kRunHalf, 1,  // join_session_trace: binds to A
                       opsight::format::kSpanContextOnRoot),
          {slot(119, SlotKind::kEnd), slot(120, SlotKind::kEnd), slot(130, SlotKind::kEnd)},
          {slot(140, SlotKind::kBegin, 1)},  // B: a root
          {slot(150, SlotKind::kBegin, 1)},  // S: a request served, a trace of its own
          span_context(0, 0xAAAA, 0xBBBB),
          {slot(155, SlotKind::kBegin, 1), slot(156, SlotKind::kEnd), slot(160, SlotKind::kEnd)},
          {slot(165, SlotKind::kBegin, 1)},  // J: joined the caller's trace
          span_context(0x1234, 0xCCCC, 0xDDDD),
          {slot(170, SlotKind::kEnd), slot(180, SlotKind::kEnd)},
          {slot(190, SlotKind::kBegin, 1)},  // C: a root whose id the program gave
          given_span_id(0x5151),
          {slot(195, SlotKind::kEnd)},
      })};
  ThreadEvents second{
      1, 7, 9,
      concat({
          {slot(200, SlotKind::kBegin, 1), slot(210, SlotKind::kBegin, 1),
           slot(220, SlotKind::kEnd), slot(230, SlotKind::kEnd)},  // D: a root, and its child
          {packed_slot(SlotKind::kAsyncBeginPacked, 1 | (uint64_t{77} << 24), 240)},
          {packed_slot(SlotKind::kAsyncEndPacked, 77, 250)},  // E: an async root
      })};
  return file_with_threads({first, second}, 1, 50, kRunTraceHex);
}

std::map<uint64_t, std::string> traces_of_whole_file(const std::string& bytes,
                                                     std::map<uint64_t, uint64_t>* parent_of) {
  auto read = opsight::io::read_native(bytes);
  EXPECT_FALSE(read.error.has_value());
  opsight::exporting::SpanView view(read.trace, {});
  std::map<uint64_t, std::string> traces;
  for (opsight::trace::RowIndex row = 0; row < read.trace.slices.size(); ++row) {
    traces[view.span_id(row)] = view.trace_id(row).to_hex();
    (*parent_of)[view.span_id(row)] = view.parent_span_id(row);
  }
  return traces;
}

std::map<uint64_t, std::string> traces_of_tail(const std::string& bytes) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight-span-view-traces-" + std::to_string(getpid()));
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
  }
  std::map<uint64_t, std::string> traces;
  opsight::io::NativeTail tail(path.string());
  opsight::io::TailVisitor visitor;
  visitor.on_span = [&](const opsight::io::EndedSpan& span) {
    traces[span.span_id] = span.trace_id.to_hex();
  };
  tail.poll(visitor);
  tail.finish(visitor);
  std::filesystem::remove(path);
  return traces;
}

TEST(SpanViewTraces, EachRootIsATraceOfItsOwnAndJoinedTracesKeepTheirs) {
  std::string bytes = traces_file();
  std::map<uint64_t, uint64_t> parent_of;
  std::map<uint64_t, std::string> whole = traces_of_whole_file(bytes, &parent_of);
  ASSERT_EQ(whole.size(), 11u);
  auto read = opsight::io::read_native(bytes);
  const auto& slices = read.trace.slices;
  auto id_at = [&](int64_t begin_ns) {  // the span begun at `begin_ns` (ticks - 50 + 0)
    for (opsight::trace::RowIndex row = 0; row < slices.size(); ++row)
      if (slices.ts[row] + read.trace.run.unix_offset_ns == begin_ns) return slices.span_id[row];
    ADD_FAILURE() << "no span begins at " << begin_ns;
    return uint64_t{0};
  };
  // Ticks are ns from the first sync at 50.
  uint64_t a = id_at(50), a_child = id_at(60), a_grandchild = id_at(65);
  uint64_t b = id_at(90), s = id_at(100), s_child = id_at(105), j = id_at(115);
  uint64_t c = id_at(140), d = id_at(150), d_child = id_at(160), e = id_at(190);
  ASSERT_EQ(c, 0x5151u);

  // A called join_session_trace (from its grandchild): A and all under it are the session's.
  EXPECT_EQ(whole[a], kRunTraceHex);
  EXPECT_EQ(whole[a_child], kRunTraceHex);
  EXPECT_EQ(whole[a_grandchild], kRunTraceHex);
  EXPECT_EQ(parent_of[a], 0u) << "the session's trace does not make A a child of anything";
  // B, C, D and E are roots of traces of their own, each derived from its span id.
  EXPECT_EQ(whole[b], opsight::trace::root_trace_id(b).to_hex());
  EXPECT_EQ(whole[c], opsight::trace::root_trace_id(0x5151).to_hex());
  EXPECT_EQ(whole[d], opsight::trace::root_trace_id(d).to_hex());
  EXPECT_EQ(whole[d_child], whole[d]);
  EXPECT_EQ(whole[e], opsight::trace::root_trace_id(e).to_hex());
  EXPECT_NE(whole[b], whole[d]);
  EXPECT_NE(whole[b], kRunTraceHex);
  // A request served inside B began a trace of its own; a joined span is in its caller's.
  EXPECT_EQ(whole[s], (TraceId{0xAAAA, 0xBBBB}.to_hex()));
  EXPECT_EQ(whole[s_child], whole[s]);
  EXPECT_EQ(parent_of[s], 0u) << "the served request is its trace's root";
  EXPECT_EQ(whole[j], (TraceId{0xCCCC, 0xDDDD}.to_hex()));
  EXPECT_EQ(parent_of[j], 0x1234u);

  // The live path gives every span the same trace.
  EXPECT_EQ(traces_of_tail(bytes), whole);
}

TEST(SpanViewTraces, RootTraceIdsAreDistinctAndNeverTheSpanIdAlone) {
  TraceId first = opsight::trace::root_trace_id(1), second = opsight::trace::root_trace_id(2);
  EXPECT_NE(first, second);
  EXPECT_NE(first.high, first.low);
  EXPECT_NE(first, TraceId{});
  EXPECT_NE(opsight::trace::root_trace_id(0), TraceId{});
}

}  // namespace
