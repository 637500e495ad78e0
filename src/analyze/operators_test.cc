#include "analyze/operators.hpp"

#include <gtest/gtest.h>

#include "trace/categories.hpp"

namespace opsight::analyze {
namespace {

TEST(OperatorTable, GroupsByOpNameArgOrNameWithSelfShares) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId op = trace.intern(trace::kCategoryOperator);
  const trace::StringId python = trace.intern("python");
  const trace::StringId op_name = trace.intern("op_name");
  // A python span that is not an operator.
  trace.slices.add(0, 10000, trace.intern("forward"), python, track);
  // aten::linear [100, 400) containing aten::addmm [150, 350): linear's self = 100.
  trace.slices.add(100, 300, trace.intern("aten::linear"), op, track);
  trace.slices.add(150, 200, trace.intern("aten::addmm"), op, track);
  trace.slices.add(500, 100, trace.intern("aten::addmm"), op, track);
  // Two ONNX Runtime nodes named by their op_name.
  trace::RowIndex gemm0 =
      trace.slices.add(1000, 40, trace.intern("/0/Gemm_kernel_time"), op, track);
  trace::RowIndex gemm1 =
      trace.slices.add(2000, 60, trace.intern("/1/Gemm_kernel_time"), op, track);
  trace::ArgValue gemm = trace::ArgValue::of_string(trace.intern("Gemm"));
  trace.slice_args.add(gemm0, op_name, gemm);
  trace.slice_args.add(gemm1, op_name, gemm);
  trace.finalize();

  OperatorTable table = compute_operator_table(trace, default_operator_categories());
  EXPECT_EQ(table.operator_slices, 5u);
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0].name, "aten::addmm");
  EXPECT_EQ(table.rows[0].duration.count, 2u);
  EXPECT_EQ(table.rows[0].duration.total_ns, 300);
  EXPECT_EQ(table.rows[0].self_ns, 300);
  // Gemm and aten::linear tie on self time (100): by name, upper case first.
  EXPECT_EQ(table.rows[1].name, "Gemm");
  EXPECT_EQ(table.rows[1].duration.count, 2u);
  EXPECT_DOUBLE_EQ(table.rows[1].duration.mean_ns, 50.0);
  EXPECT_EQ(table.rows[2].name, "aten::linear");
  EXPECT_EQ(table.rows[2].duration.total_ns, 300);
  EXPECT_EQ(table.rows[2].self_ns, 100);
  EXPECT_EQ(table.total_self_ns, 300 + 100 + 100);
  double shares = 0;
  for (const OperatorRow& row : table.rows) shares += row.share;
  EXPECT_DOUBLE_EQ(shares, 1.0);
}

TEST(OperatorTable, TimeInNonOperatorChildrenStaysWithTheOperator) {
  trace::Trace trace;
  trace::TrackId cpu = trace.thread_track(1, 1);
  trace::TrackId gpu = trace.thread_track(1, 2);
  const trace::StringId op = trace.intern(trace::kCategoryOperator);
  const trace::StringId kernel = trace.intern(trace::kCategoryGpuKernel);
  const trace::StringId runtime = trace.intern(trace::kCategoryCudaRuntime);
  // aten::addmm [0, 150) > cudaLaunchKernel [10, 140) > aten::fill_ [20, 30) (an operator
  // reached through a non-operator span); a GPU kernel also named aten::addmm.
  trace.slices.add(0, 150, trace.intern("aten::addmm"), op, cpu);
  trace.slices.add(10, 130, trace.intern("cudaLaunchKernel"), runtime, cpu);
  trace.slices.add(20, 10, trace.intern("aten::fill_"), op, cpu);
  trace.slices.add(100, 400, trace.intern("aten::addmm"), kernel, gpu);
  trace.finalize();
  OperatorTable table = compute_operator_table(trace, default_operator_categories());
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0].category, "gpu_kernel");
  EXPECT_DOUBLE_EQ(table.rows[0].share, 1.0);  // alone in its category
  EXPECT_EQ(table.rows[1].name, "aten::addmm");
  EXPECT_EQ(table.rows[1].category, "operator");
  EXPECT_EQ(table.rows[1].self_ns, 140);  // 150 minus fill_'s 10: the launch stays in it
  EXPECT_DOUBLE_EQ(table.rows[1].share, 140.0 / 150.0);
  EXPECT_EQ(table.rows[2].name, "aten::fill_");
  EXPECT_EQ(table.total_self_ns, 150 + 400);
}

TEST(OperatorTable, OtherCategoriesOnRequest) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace.slices.add(0, 100, trace.intern("step"), trace.intern("python"), track);
  trace.finalize();
  EXPECT_TRUE(compute_operator_table(trace, default_operator_categories()).rows.empty());
  OperatorTable table = compute_operator_table(trace, {"python"});
  ASSERT_EQ(table.rows.size(), 1u);
  EXPECT_EQ(table.rows[0].category, "python");
}

}  // namespace
}  // namespace opsight::analyze
