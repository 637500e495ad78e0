// opsight._native's GPU tracing switch (src/cuda): paused and resumed with opsight's own.

#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "cuda/gpu_collection.hpp"

namespace nb = nanobind;

namespace opsight::python {

void bind_cuda(nb::module_& m) {
  // GPU tracing follows the switch (opsight.integrations.cuda): false when none runs.
  m.def(
      "set_gpu_tracing_paused",
      [](bool paused) {
        return paused ? cuda::pause_gpu_collection() : cuda::resume_gpu_collection();
      },
      nb::arg("paused"));
}

}  // namespace opsight::python
