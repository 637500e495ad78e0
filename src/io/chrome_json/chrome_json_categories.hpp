// Maps the categories of the PyTorch profiler (Kineto) and ONNX Runtime to the canonical
// ones of trace/categories.hpp, once a whole trace is read (the source format is known only
// then), and records in run.extra[trace::kCategoryMapKey] the entries that applied
// (docs/reports.md, "Foreign traces").
#pragma once

#include "trace/trace.hpp"

namespace opsight::io::chrome_json {

void map_pytorch_categories(trace::Trace& trace);
void map_onnxruntime_categories(trace::Trace& trace);

}  // namespace opsight::io::chrome_json
