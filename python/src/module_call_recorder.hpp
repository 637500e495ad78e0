// opsight._native.ModuleCallRecorder: torch module calls as spans, in C (see the .cc).
#pragma once

#include <Python.h>

namespace opsight::python {

// Creates the type and adds it to `module`; false with a Python error set on failure.
bool add_module_call_recorder_type(PyObject* module);

}  // namespace opsight::python
