// opsight._native's bindings, one file per core module (src/<module>/ -> bind_<module>.cc):
// module.cc calls each bind_* in turn. A Python `Trace` is the core's store::LoadedTrace
// (a trace, its label, what its reader said about damage): bind_trace registers the class
// with its data methods and the modules that act on a trace (io, report, store, export) add
// theirs to it.
#pragma once

#include <nanobind/nanobind.h>

#include "store/trace_source.hpp"

namespace opsight::python {

using TraceClass = nanobind::class_<store::LoadedTrace>;

// `Trace.damage`'s text: the first damaged input's message, or nullopt for a whole trace.
inline std::optional<std::string> first_damage(const store::LoadedTrace& loaded) {
  if (loaded.damage.empty()) return std::nullopt;
  return loaded.damage.front();
}

void bind_record(nanobind::module_& module);   // spans, flows, trace context, the switch
void bind_collect(nanobind::module_& module);  // per-span metrics
void bind_cuda(nanobind::module_& module);     // GPU tracing paused with the switch
void bind_session(nanobind::module_& module);  // Session, opsight ctl, the flight recorder
TraceClass bind_trace(nanobind::module_& module);
void bind_io(nanobind::module_& module, TraceClass& trace_class);
void bind_report(nanobind::module_& module, TraceClass& trace_class);
void bind_store(nanobind::module_& module);  // load, save_trace_files, save_trace
void bind_export(nanobind::module_& module, TraceClass& trace_class);
void bind_cli(nanobind::module_& module);  // exit statuses, the core's commands

}  // namespace opsight::python
