// opsight._torch_observer: torch operators as opsight spans. Built against the torch that
// was installed when the package was built (python/CMakeLists.txt, OPSIGHT_WITH_TORCH), it
// registers a global RecordFunction callback, torch's own observer mechanism (the one the
// PyTorch profiler uses): every aten operator a thread runs begins a span when torch starts
// it and ends it when torch finishes it, through the recorder of opsight._native (the
// capsule of recorder_api.h), so operators land on the same clock and the same per-thread
// timelines as the Python spans that called them, nested under them.
//
// Cost per operator: a load and a branch while no session records; when one records, a
// name lookup in a per-thread direct-mapped cache and the recorder's begin/end, with the
// thread's state in one block of static TLS (docs/torch.md has the figures). Input shapes, when
// asked for, need torch to keep the inputs for the callback and a string built per operator: a
// larger cost, which is why they are off by default.
//
// That cost is charged to the tracer overhead the reports show: the recorder counts its
// own events, but torch also builds a RecordFunction for every operator only because a
// callback is installed. install() measures that floor once per process (a trivial
// operator run with and without the callback) and every recorded operator adds it, plus
// the measured time of its input-shape string, to its thread's overhead: in batches, when
// a thread's outermost operator ends with 64 or more uncharged, and when a session stops
// (flush_charges(), for the stopping thread; another thread's last few are not charged).
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <Python.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "recorder_api.h"

namespace {

const OpsightRecorderApi* g_api = nullptr;
// The recorder's "a session records" flag (recorder_api.h): one load, no call.
const std::atomic<bool>* g_recording_flag = nullptr;

bool recording() { return g_recording_flag->load(std::memory_order_relaxed); }

// What the callback of one installation records. Only one installation is live at a time
// (install() replaces it), which keeps the callbacks free of lookups.
struct ObserverOptions {
  bool record_shapes = false;
};
ObserverOptions g_options;
bool g_installed = false;
at::CallbackHandle g_handle = 0;
// What torch's operator machinery costs per operator because the callback is installed,
// in ns (measured by install(); read by the callbacks of every thread).
std::atomic<double> g_floor_ns{0.0};
// Where a calibrating callback puts the name id it found (so the lookup is not optimised
// away).
std::atomic<uint32_t> g_calibration_sink{0};

// Name ids of the operator names one thread has seen. RecordFunction names of dispatcher
// operators point into the operator's registered name, stable for the process; names of
// user scopes may be owned by the RecordFunction and freed after it, so the cache keys on
// the pointer but keeps a copy of the text and checks it on each hit. A direct-mapped
// table answers the hot path (a hash of the pointer, a compare of a short string); the
// map by text is the slow path of a first sighting or a collision.
class OperatorNames {
 public:
  uint32_t name_id(const char* name, at::RecordScope scope) {
    auto address = reinterpret_cast<uintptr_t>(name);
    Entry& entry = entries_[((address >> 3) ^ (address >> 11)) & (kEntries - 1)];
    if (entry.pointer == name && std::strcmp(entry.text.c_str(), name) == 0) [[likely]]
      return entry.name_id;
    // The category is part of the key: the same text under two scopes gives two names.
    std::string_view category = category_of(scope);
    std::string key(category);
    key.push_back('\0');
    key.append(name);
    uint32_t& id = by_text_[key];
    if (id == 0)
      id = g_api->register_name(name, std::strlen(name), category.data(), category.size());
    entry.pointer = name;
    entry.text = name;
    entry.name_id = id;
    return id;
  }

 private:
  static std::string_view category_of(at::RecordScope scope) {
    switch (scope) {
      case at::RecordScope::USER_SCOPE:
        return "annotation";
      case at::RecordScope::TORCHSCRIPT_FUNCTION:
        return "torchscript";
      default:
        return "operator";
    }
  }

  struct Entry {
    const char* pointer = nullptr;
    uint32_t name_id = 0;
    std::string text;
  };
  static constexpr size_t kEntries = 512;
  std::array<Entry, kEntries> entries_;
  std::unordered_map<std::string, uint32_t> by_text_;
};

// Everything the callbacks of one thread touch on every operator, in one block of static
// TLS (initial-exec: a plain %fs-relative load, no __tls_get_addr call per access).
//
// `recorded_bits` is the stack of whether each open RecordFunction of this thread began a
// span: torch calls the end callback of every start, LIFO per thread; an end without its
// start on this thread (an operator finished elsewhere) pops nothing and records nothing.
// Operators nested deeper than kMaxDepth are not recorded. `uncharged` counts recorded
// operators whose floor is not yet added to the thread's overhead: it is charged in one
// call when the thread's outermost operator ends with at least kChargeBatch pending (and
// by uninstall() on its thread), not per operator.
constexpr uint32_t kMaxDepth = 256;
constexpr uint32_t kChargeBatch = 64;
struct ThreadObserverState {
  uint64_t recorded_bits[kMaxDepth / 64];
  uint32_t depth;
  uint32_t uncharged;
  bool calibrating;          // set while install() measures the floor: nothing is recorded
  bool record_function_off;  // on_sampling_changed switched RecordFunction off here
  OperatorNames* names;
};
thread_local constinit ThreadObserverState t_state __attribute__((tls_model("initial-exec"))) = {};

// Frees a thread's OperatorNames when the thread exits; touched once per thread, when the
// names are first needed, so the hot path never goes through a TLS initialiser.
struct OperatorNamesOwner {
  std::unique_ptr<OperatorNames> names;
};
thread_local OperatorNamesOwner t_names_owner;

OperatorNames& thread_names() {
  if (t_state.names == nullptr) [[unlikely]] {
    t_names_owner.names = std::make_unique<OperatorNames>();
    t_state.names = t_names_owner.names.get();
  }
  return *t_state.names;
}

void charge_uncharged_operators() {
  if (t_state.uncharged == 0) return;
  g_api->add_overhead_ns(t_state.uncharged * g_floor_ns.load(std::memory_order_relaxed));
  t_state.uncharged = 0;
}

void append_shape(std::string& out, const at::Tensor& tensor) {
  out.push_back('[');
  if (tensor.defined()) {
    bool first = true;
    for (int64_t size : tensor.sizes()) {
      if (!first) out += ", ";
      first = false;
      out += std::to_string(size);
    }
  }
  out.push_back(']');
}

// Input shapes as Kineto writes them: one entry per input, [] for a non-tensor, a list of
// shapes for a tensor list.
std::string input_shapes(const at::RecordFunction& function) {
  std::string out = "[";
  bool first = true;
  for (const c10::IValue& input : function.inputs()) {
    if (!first) out += ", ";
    first = false;
    if (input.isTensor()) {
      append_shape(out, input.toTensor());
    } else if (input.isTensorList()) {
      out.push_back('[');
      bool first_tensor = true;
      for (const at::Tensor& tensor : input.toTensorList().vec()) {
        if (!first_tensor) out += ", ";
        first_tensor = false;
        append_shape(out, tensor);
      }
      out.push_back(']');
    } else {
      out += "[]";
    }
  }
  out.push_back(']');
  return out;
}

// The shapes string of the span just begun, its time charged to the thread's overhead.
void record_input_shapes(const at::RecordFunction& function) {
  auto began = std::chrono::steady_clock::now();
  std::string shapes = input_shapes(function);
  static constexpr std::string_view kKey = "input_shapes";
  g_api->add_arg_string(kKey.data(), kKey.size(), shapes.data(), shapes.size());
  g_api->add_overhead_ns(
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - began).count());
}

std::unique_ptr<at::ObserverContext> on_operator_start(const at::RecordFunction& function) {
  ThreadObserverState& state = t_state;
  uint32_t depth = state.depth++;
  if (depth >= kMaxDepth) [[unlikely]]
    return nullptr;
  uint64_t bit = uint64_t{1} << (depth % 64);
  state.recorded_bits[depth / 64] &= ~bit;
  if (!recording() && !state.calibrating) return nullptr;
  const char* name = function.name();
  if (name == nullptr) [[unlikely]]
    name = "(unnamed operator)";
  uint32_t name_id = thread_names().name_id(name, function.scope());
  // Calibrating: every step but the span's two events (which the recorder charges itself),
  // so that the floor measured includes this callback's own work.
  if (state.calibrating) [[unlikely]] {
    g_calibration_sink.store(name_id, std::memory_order_relaxed);
    return nullptr;
  }
  if (g_api->begin(name_id) == 0) return nullptr;
  state.recorded_bits[depth / 64] |= bit;
  ++state.uncharged;
  if (g_options.record_shapes && function.needsInputs()) record_input_shapes(function);
  return nullptr;
}

void on_operator_end(const at::RecordFunction& /*function*/, at::ObserverContext* /*context*/) {
  ThreadObserverState& state = t_state;
  if (state.depth == 0) return;
  uint32_t depth = --state.depth;
  if (depth >= kMaxDepth) return;
  if (state.recorded_bits[depth / 64] & (uint64_t{1} << (depth % 64))) g_api->end();
  if (depth == 0 && state.uncharged >= kChargeBatch) charge_uncharged_operators();
}

// A unit the session's sampling left out costs what no session costs: torch builds no
// RecordFunction on this thread (nor on the intra-op threads it hands work to, which take
// its thread-local state) until the unit ends. (torch.profiler sees nothing there either.)
// Except a unit whose root is an operator (operators recorded with no span around them):
// torch rebuilds its callback tables on every switch (about 0.8 µs each), more than the few
// operators nested in one operator cost while the callback skips them, so RecordFunction
// stays on: a unit that begins while an operator runs on the thread (depth > 0) is one.
// Only a switch made here is undone here: a thread on which the program itself turned
// RecordFunction off keeps it off.
void on_sampling_changed(int sampled_out) {
  ThreadObserverState& state = t_state;
  if (sampled_out != 0) {
    if (state.depth > 0 || !at::isRecordFunctionEnabled()) return;
    state.record_function_off = true;
    at::enableRecordFunction(false);
  } else if (state.record_function_off) {
    state.record_function_off = false;
    at::enableRecordFunction(true);
  }
}

void remove_callback() {
  if (!g_installed) return;
  charge_uncharged_operators();
  at::removeCallback(g_handle);
  g_installed = false;
}

// Nanoseconds per operator of a batch of trivial operators (empty tensors).
double ns_per_trivial_operator() {
  constexpr int kOperators = 300;
  auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < kOperators; ++i) at::empty({0});
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - began)
             .count() /
         kOperators;
}

void add_callback() {
  at::RecordFunctionCallback callback(&on_operator_start, &on_operator_end);
  callback.needsInputs(g_options.record_shapes)
      .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE,
               at::RecordScope::TORCHSCRIPT_FUNCTION});
  g_handle = at::addGlobalCallback(callback);
}

// The installed callback's floor: the fastest batch of a trivial operator with it minus
// the fastest without it (never negative), the two alternating so that a busy neighbour
// slows both alike; the callback does all its work (the name lookup included) but write
// the span meanwhile.
double measure_floor_ns() {
  constexpr int kRounds = 8;
  double with_callback = std::numeric_limits<double>::infinity();
  double without_callback = with_callback;
  for (int round = 0; round < kRounds; ++round) {
    t_state.calibrating = true;
    with_callback = std::min(with_callback, ns_per_trivial_operator());
    t_state.calibrating = false;
    at::removeCallback(g_handle);
    without_callback = std::min(without_callback, ns_per_trivial_operator());
    add_callback();
  }
  return std::max(0.0, with_callback - without_callback);
}

PyObject* install(PyObject* /*module*/, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"record_shapes", nullptr};
  int record_shapes = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", const_cast<char**>(keywords),
                                   &record_shapes))
    return nullptr;
  remove_callback();
  g_options.record_shapes = record_shapes != 0;
  try {
    add_callback();
    g_installed = true;
    // Measured once per process and mode (about 5 ms): sessions may start often.
    static double floor_ns_by_mode[2] = {-1.0, -1.0};
    double& floor = floor_ns_by_mode[g_options.record_shapes ? 1 : 0];
    if (floor < 0) floor = measure_floor_ns();
    g_floor_ns.store(floor, std::memory_order_relaxed);
  } catch (const std::exception& error) {
    PyErr_Format(PyExc_RuntimeError, "torch refused the operator observer: %s", error.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* uninstall(PyObject* /*module*/, PyObject* /*args*/) {
  remove_callback();
  Py_RETURN_NONE;
}

PyObject* installed(PyObject* /*module*/, PyObject* /*args*/) {
  return PyBool_FromLong(g_installed ? 1 : 0);
}

PyObject* flush_charges(PyObject* /*module*/, PyObject* /*args*/) {
  charge_uncharged_operators();
  Py_RETURN_NONE;
}

PyObject* floor_ns(PyObject* /*module*/, PyObject* /*args*/) {
  return PyFloat_FromDouble(g_floor_ns.load(std::memory_order_relaxed));
}

PyMethodDef kMethods[] = {
    {"install", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&install)),
     METH_VARARGS | METH_KEYWORDS,
     "install(record_shapes=False): records every torch operator as a span (replaces an "
     "earlier installation)."},
    {"uninstall", &uninstall, METH_NOARGS, "Removes the operator observer."},
    {"installed", &installed, METH_NOARGS, "Whether the operator observer is installed."},
    {"flush_charges", &flush_charges, METH_NOARGS,
     "Charges the calling thread's recorded operators whose floor is not yet in its tracer "
     "overhead (a session stopping calls it)."},
    {"floor_ns", &floor_ns, METH_NOARGS,
     "What torch's operator machinery costs per operator with the observer installed, in "
     "ns (measured by install(); charged to the overhead of every recorded operator)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "_torch_observer",
    "torch operators as opsight spans (private: use opsight.torch)",
    -1,
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__torch_observer() {
  g_api = static_cast<const OpsightRecorderApi*>(PyCapsule_Import(OPSIGHT_RECORDER_API_CAPSULE, 0));
  if (g_api == nullptr) return nullptr;
  if (g_api->abi_version != OPSIGHT_RECORDER_API_VERSION) {
    PyErr_Format(PyExc_ImportError,
                 "opsight._torch_observer expects recorder API %d, opsight._native has %u: "
                 "reinstall opsight",
                 OPSIGHT_RECORDER_API_VERSION, g_api->abi_version);
    return nullptr;
  }
  g_recording_flag = static_cast<const std::atomic<bool>*>(g_api->recording_flag);
  // For the life of the process, installed or not: a thread that entered a sampled-out
  // unit gets its RecordFunction back when it leaves, even if the observer was removed
  // meanwhile.
  g_api->set_sampling_listener(&on_sampling_changed);
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  if (PyModule_AddStringConstant(module, "built_for_torch", OPSIGHT_TORCH_VERSION) != 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
