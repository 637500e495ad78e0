/* The recorder seen by other native extensions of the opsight package (the torch operator
 * observer, built against the installed torch, is one): a table of plain C functions that
 * opsight._native hands out as the capsule `opsight._native._recorder_api`, so that every
 * extension records into the one recorder of the process instead of linking its own.
 *
 * Usage:  const OpsightRecorderApi* api = PyCapsule_Import("opsight._native._recorder_api", 0);
 *         check api->abi_version == OPSIGHT_RECORDER_API_VERSION, then call through it.
 *
 * Thread-safety: every function may be called from any thread, with or without the GIL.
 * Cost: one indirect call on top of the inline recorder call it forwards to. */
#ifndef OPSIGHT_PYTHON_RECORDER_API_H_
#define OPSIGHT_PYTHON_RECORDER_API_H_

#include <stddef.h>
#include <stdint.h>

#define OPSIGHT_RECORDER_API_VERSION 3
#define OPSIGHT_RECORDER_API_CAPSULE "opsight._native._recorder_api"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct OpsightRecorderApi {
  uint32_t abi_version; /* OPSIGHT_RECORDER_API_VERSION */
  /* Interns a span name (and its category) once; returns its id, never 0. Takes a lock:
   * callers cache the id. */
  uint32_t (*register_name)(const char* name, size_t name_size, const char* category,
                            size_t category_size);
  /* Nonzero while a session records (not paused). */
  int (*recording)(void);
  /* Begins a span on the calling thread; nonzero when it recorded (call end only then). */
  int (*begin)(uint32_t name_id);
  /* Ends the calling thread's innermost open span. */
  void (*end)(void);
  /* Attributes of the calling thread's innermost open span. */
  void (*add_arg_string)(const char* key, size_t key_size, const char* value, size_t value_size);
  void (*add_arg_int)(const char* key, size_t key_size, int64_t value);
  /* Adds nanoseconds to the calling thread's tracer overhead: time the caller's hooks
   * cost that the recorder cannot see (the reports' overhead line shows it). */
  void (*add_overhead_ns)(double nanoseconds);
  /* The flag `recording` reads, for callers on a per-operator hot path: a C++ caller casts
   * it to `const std::atomic<bool>*` and loads it relaxed (nonzero while a session
   * records), saving the call. */
  const void* recording_flag;
  /* Sets the one function called on a thread when it enters (1) or leaves (0) a unit the
   * session's sampling left out (NULL: none), so that the caller's own hooks can stand down
   * meanwhile. */
  void (*set_sampling_listener)(void (*listener)(int sampled_out));
} OpsightRecorderApi;

#ifdef __cplusplus
}
#endif

#endif /* OPSIGHT_PYTHON_RECORDER_API_H_ */
