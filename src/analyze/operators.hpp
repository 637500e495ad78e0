// Operator tables (the Furiosa profiler's print_npu_operators, Qualcomm's opstats): per
// operator, how often it ran, how long in total and on average, and its share of all
// operator time.
//
// An operator is a slice whose category is one of `categories` (by default the canonical
// "operator" and "gpu_kernel" of src/trace/categories.hpp, which the importers map
// PyTorch's cpu_op/kernel and ONNX Runtime's Node events to). Its row is named by its
// `op_name` argument when it has one (ONNX Runtime names nodes "/0/Gemm_kernel_time" and
// says op_name "Gemm"), otherwise by its own name (PyTorch's "aten::addmm").
//
// Operators nest (aten::linear calls aten::addmm), so the table carries both inclusive and
// self time. An operator's self time is its duration minus that of the operators nested in
// it: time in a child that is not an operator (cudaLaunchKernel, a Python callback) stays
// with the operator, so every nanosecond of operator time is in exactly one row.
//
// Rows are keyed on (category, name): a CPU operator and a GPU kernel of the same name stay
// apart. CPU operators and GPU kernels run at the same time, so a row's share is of its own
// category's self time: the shares of each category add up to 100%.
//
// Thread-safety: pure functions over a finalized trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyze/distribution.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

struct OperatorRow {
  std::string name;
  std::string category;   // of its first slice
  Distribution duration;  // inclusive durations
  int64_t self_ns = 0;
  double share = 0.0;  // self_ns / the self time of all operators of its category
};

struct OperatorTable {
  std::vector<OperatorRow> rows;  // by self time, descending; ties by name, category
  int64_t total_self_ns = 0;
  uint64_t operator_slices = 0;
  std::vector<std::string> categories;  // what was counted as an operator
};

// The default categories: "operator", "gpu_kernel".
std::vector<std::string> default_operator_categories();

OperatorTable compute_operator_table(const trace::Trace& trace,
                                     const std::vector<std::string>& categories);

}  // namespace opsight::analyze
