// opsight._native: the core, seen from Python. The traced-call types of the hot path are
// plain CPython types (traced_callables.cc, module_call_recorder.cc); everything else is
// bound with nanobind, one file per core module (bindings.hpp). The Python package
// (python/opsight/) is the only intended caller.
#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "module_call_recorder.hpp"
#include "traced_callables.hpp"

namespace nb = nanobind;

NB_MODULE(_native, m) {
  using namespace opsight::python;
  m.doc() = "opsight's C++ core (private: use the opsight package)";
  if (!add_traced_callable_types(m.ptr())) throw nb::python_error();
  if (!add_module_call_recorder_type(m.ptr())) throw nb::python_error();

  bind_record(m);
  bind_collect(m);
  bind_cuda(m);
  bind_session(m);
  TraceClass trace_class = bind_trace(m);
  bind_io(m, trace_class);
  bind_report(m, trace_class);
  bind_store(m);
  bind_export(m, trace_class);
  bind_cli(m);
}
