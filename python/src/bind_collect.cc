// opsight._native's per-span metrics (src/collect, include/opsight/metrics.hpp): what
// opsight._capture.metrics wraps.

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <utility>

#include "bindings.hpp"
#include "opsight/metrics.hpp"
#include "opsight/opsight.hpp"
#include "traced_callables.hpp"

namespace nb = nanobind;

namespace opsight::python {

void bind_collect(nb::module_& m) {
  // Metrics (opsight._capture.metrics wraps these).
  nb::class_<opsight::MetricStart>(m, "MetricStart")
      .def_ro("groups", &opsight::MetricStart::groups);
  m.def("start_metrics", &opsight::start_metrics, nb::arg("groups"));
  m.def("finish_metrics", &opsight::finish_metrics, nb::arg("start"));
  m.def("metric_group_from_name", &opsight::metric_group_from_name, nb::arg("name"));
  m.def("count_network_bytes", &opsight::count_network_bytes, nb::arg("sent"), nb::arg("received"));
  m.def("metric_ticks", [] { return opsight::internal::now_ticks(); });
  m.def("account_metric_cost", &opsight::internal::account_metric_cost, nb::arg("group"),
        nb::arg("readings"), nb::arg("ticks"));
  m.def("set_session_metrics", &opsight::python::set_session_metrics, nb::arg("groups"),
        nb::arg("heap"));
  m.def("session_metrics", [] {
    return std::make_pair(opsight::python::session_metrics(), opsight::python::session_heap());
  });
  m.def("set_heap_hooks", [](nb::object start, nb::object finish) {
    opsight::python::set_heap_hooks(start.ptr(), finish.ptr());
  });
}

}  // namespace opsight::python
