// opsight._native.ModuleCallRecorder: the hot path of torch module spans (opsight.torch).
//
// opsight.torch replaces nn.Module.__call__ with a small Python function (it must stay a
// Python function: TorchDynamo inlines it and folds its is_compiling() check, so a compiled
// model gets no graph break) that hands every eager call to a ModuleCallRecorder:
// `recorder(module, args, kwargs)`. The recorder finds the module's span name id (a map by
// the module's address, checked against a weak reference, so a module freed and another
// allocated at the same address is named again), keeps the thread's stack of modules being
// called (the parent of a module met for the first time names it), records a span of
// category `module` around torch's own __call__, and charges the thread's tracer overhead
// with what the wrapper costs the program beyond the recorder's two events (measured once
// per process by opsight.torch, see `calibrating`). A module met for the first time is
// named by the Python callable `name_of(module, parent)`; every later call stays in C.
//
// While no session records, a call costs the Python wrapper, one flag load and the call.
// Thread-safety: every call holds the GIL; the names map is shared under it, the module
// stack is per thread.
#include <Python.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "opsight/opsight.hpp"

namespace opsight::python {
namespace {

struct NameEntry {
  PyObject* weak_module;  // a new reference to a weak reference of the module
  uint32_t name_id;
};
using NamesByAddress = std::unordered_map<PyObject*, NameEntry>;
// Modules made and dropped in a loop must not grow the map without bound.
constexpr size_t kMaxNamedModules = 100'000;

struct ModuleCallRecorder {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* original_call;  // nn.Module.__call__ as torch defines it
  PyObject* name_of;        // name_of(module, parent) -> name id, for a first sighting
  NamesByAddress* names;
  double charge_ns;  // what one recorded call costs beyond the recorder's own events
  bool calibrating;  // goes through every step but begin/end: for measuring charge_ns
};

// The modules each thread is calling, innermost last (borrowed: each is alive while its
// call runs). Reached through a pointer in static TLS; the owner frees it at thread exit
// and is touched only once per thread.
struct ThreadModules {
  std::vector<PyObject*> stack;
  uint32_t uncharged = 0;  // recorded calls whose charge waits for the outermost call's end
};
thread_local constinit ThreadModules* t_modules __attribute__((tls_model("initial-exec"))) =
    nullptr;
struct ThreadModulesOwner {
  std::unique_ptr<ThreadModules> modules;
};
thread_local ThreadModulesOwner t_modules_owner;

ThreadModules& thread_modules() {
  if (t_modules == nullptr) [[unlikely]] {
    t_modules_owner.modules = std::make_unique<ThreadModules>();
    t_modules = t_modules_owner.modules.get();
  }
  return *t_modules;
}

void forget_names(NamesByAddress& names) {
  for (auto& [address, entry] : names) Py_XDECREF(entry.weak_module);
  names.clear();
}

PyObject* weak_referent(PyObject* weak) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* referent = nullptr;
  if (PyWeakref_GetRef(weak, &referent) < 0) PyErr_Clear();
  Py_XDECREF(referent);  // only compared by address, never used
  return referent;
#else
  return PyWeakref_GetObject(weak);
#endif
}

// The module's span name id, or 0 (nothing recorded, no error set) when it has none.
uint32_t name_id_of(ModuleCallRecorder* recorder, PyObject* module, PyObject* parent) {
  NamesByAddress& names = *recorder->names;
  if (auto found = names.find(module); found != names.end()) {
    if (weak_referent(found->second.weak_module) == module) [[likely]]
      return found->second.name_id;
    Py_XDECREF(found->second.weak_module);
    names.erase(found);
  }
  PyObject* id_object = PyObject_CallFunctionObjArgs(recorder->name_of, module, parent, nullptr);
  if (id_object == nullptr) {  // a module that cannot be named is not recorded
    PyErr_Clear();
    return 0;
  }
  unsigned long name_id = PyLong_AsUnsignedLong(id_object);
  Py_DECREF(id_object);
  if (PyErr_Occurred() != nullptr || name_id == 0 || name_id > UINT32_MAX) {
    PyErr_Clear();
    return 0;
  }
  PyObject* weak_module = PyWeakref_NewRef(module, nullptr);
  if (weak_module == nullptr) {  // not weakly referable: named again at each call
    PyErr_Clear();
    return static_cast<uint32_t>(name_id);
  }
  if (names.size() >= kMaxNamedModules) forget_names(names);
  names.emplace(module, NameEntry{weak_module, static_cast<uint32_t>(name_id)});
  return static_cast<uint32_t>(name_id);
}

// original_call(module, *args, **kwargs).
PyObject* call_original(ModuleCallRecorder* recorder, PyObject* module, PyObject* args,
                        PyObject* kwargs) {
  Py_ssize_t count = PyTuple_GET_SIZE(args);
  PyObject* small[9];
  std::vector<PyObject*> large;
  PyObject** arguments = small;
  if (count + 1 > static_cast<Py_ssize_t>(std::size(small))) {
    large.resize(static_cast<size_t>(count) + 1);
    arguments = large.data();
  }
  arguments[0] = module;
  for (Py_ssize_t i = 0; i < count; ++i) arguments[i + 1] = PyTuple_GET_ITEM(args, i);
  return PyObject_VectorcallDict(recorder->original_call, arguments, static_cast<size_t>(count) + 1,
                                 kwargs);
}

PyObject* module_call(PyObject* callable, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  auto* recorder = reinterpret_cast<ModuleCallRecorder*>(callable);
  if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != nullptr || !PyTuple_Check(argv[1]) ||
      (argv[2] != Py_None && !PyDict_Check(argv[2]))) {
    PyErr_SetString(PyExc_TypeError,
                    "ModuleCallRecorder expects (module, args: tuple, kwargs: dict | None)");
    return nullptr;
  }
  PyObject* module = argv[0];
  PyObject* args = argv[1];
  PyObject* kwargs = argv[2] == Py_None ? nullptr : argv[2];
  if (!opsight::recording() && !recorder->calibrating)
    return call_original(recorder, module, args, kwargs);
  ThreadModules& modules = thread_modules();
  PyObject* parent = modules.stack.empty() ? Py_None : modules.stack.back();
  uint32_t name_id = name_id_of(recorder, module, parent);
  if (name_id == 0) return call_original(recorder, module, args, kwargs);
  bool recorded = !recorder->calibrating && opsight::begin(name_id);
  modules.stack.push_back(module);
  PyObject* result = call_original(recorder, module, args, kwargs);
  modules.stack.pop_back();
  if (recorded) {
    opsight::end();
    ++modules.uncharged;
  }
  if (modules.stack.empty() && modules.uncharged != 0) {
    opsight::internal::add_overhead_ns(modules.uncharged * recorder->charge_ns);
    modules.uncharged = 0;
  }
  return result;
}

PyObject* recorder_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"original_call", "name_of", "charge_ns", "calibrating", nullptr};
  PyObject* original_call = nullptr;
  PyObject* name_of = nullptr;
  double charge_ns = 0.0;
  int calibrating = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|dp", const_cast<char**>(keywords),
                                   &original_call, &name_of, &charge_ns, &calibrating))
    return nullptr;
  if (!PyCallable_Check(original_call) || !PyCallable_Check(name_of)) {
    PyErr_SetString(PyExc_TypeError,
                    "ModuleCallRecorder: original_call and name_of must be "
                    "callable");
    return nullptr;
  }
  auto* recorder = reinterpret_cast<ModuleCallRecorder*>(type->tp_alloc(type, 0));
  if (recorder == nullptr) return nullptr;
  recorder->vectorcall = module_call;
  recorder->original_call = Py_NewRef(original_call);
  recorder->name_of = Py_NewRef(name_of);
  recorder->names = new NamesByAddress();
  recorder->charge_ns = charge_ns > 0 ? charge_ns : 0.0;
  recorder->calibrating = calibrating != 0;
  return reinterpret_cast<PyObject*>(recorder);
}

int recorder_traverse(PyObject* object, visitproc visit, void* arg) {
  auto* recorder = reinterpret_cast<ModuleCallRecorder*>(object);
  Py_VISIT(recorder->original_call);
  Py_VISIT(recorder->name_of);
  return 0;
}

int recorder_clear(PyObject* object) {
  auto* recorder = reinterpret_cast<ModuleCallRecorder*>(object);
  Py_CLEAR(recorder->original_call);
  Py_CLEAR(recorder->name_of);
  return 0;
}

void recorder_dealloc(PyObject* object) {
  PyObject_GC_UnTrack(object);
  auto* recorder = reinterpret_cast<ModuleCallRecorder*>(object);
  recorder_clear(object);
  if (recorder->names != nullptr) {
    forget_names(*recorder->names);
    delete recorder->names;
    recorder->names = nullptr;
  }
  Py_TYPE(object)->tp_free(object);
}

PyObject* recorder_get_charge_ns(PyObject* object, void* /*closure*/) {
  return PyFloat_FromDouble(reinterpret_cast<ModuleCallRecorder*>(object)->charge_ns);
}

PyObject* recorder_named_modules(PyObject* object, void* /*closure*/) {
  return PyLong_FromSize_t(reinterpret_cast<ModuleCallRecorder*>(object)->names->size());
}

PyGetSetDef g_recorder_getset[] = {
    {"charge_ns", recorder_get_charge_ns, nullptr,
     "What one recorded call adds to its thread's tracer overhead (ns).", nullptr},
    {"named_modules", recorder_named_modules, nullptr, "How many modules have a cached span name.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject g_module_call_recorder_type{};  // filled in by add_module_call_recorder_type()

}  // namespace

bool add_module_call_recorder_type(PyObject* module) {
  PyTypeObject& type = g_module_call_recorder_type;
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&type), 1);  // a static type is never freed
  type.tp_name = "opsight._native.ModuleCallRecorder";
  type.tp_doc =
      "ModuleCallRecorder(original_call, name_of, charge_ns=0.0, calibrating=False): "
      "recorder(module, args, kwargs) calls original_call(module, *args, **kwargs) inside a "
      "span of category module (see opsight.torch).";
  type.tp_basicsize = sizeof(ModuleCallRecorder);
  type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  type.tp_new = recorder_new;
  type.tp_dealloc = recorder_dealloc;
  type.tp_traverse = recorder_traverse;
  type.tp_clear = recorder_clear;
  type.tp_call = PyVectorcall_Call;
  type.tp_vectorcall_offset = offsetof(ModuleCallRecorder, vectorcall);
  type.tp_getset = g_recorder_getset;
  if (PyType_Ready(&type) < 0) return false;
  Py_INCREF(&type);
  if (PyModule_AddObject(module, "ModuleCallRecorder", reinterpret_cast<PyObject*>(&type)) < 0) {
    Py_DECREF(&type);
    return false;
  }
  return true;
}

}  // namespace opsight::python
