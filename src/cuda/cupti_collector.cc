// The GPU collector through CUPTI's Activity API (see gpu_collection.hpp). libcupti is
// loaded with dlopen; CUPTI hands its filled buffers to buffer_completed (on a thread of
// CUPTI's), which only queues them; the collector's parser thread turns them into records
// (cupti_records.cc) and gives the buffers back. Built only with OPSIGHT_WITH_CUDA.
#include <cupti.h>
#include <dlfcn.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/clock_alignment.hpp"
#include "cuda/cupti_records.hpp"
#include "cuda/gpu_collection.hpp"

namespace opsight::cuda {
namespace {

// The CUPTI functions the collector calls, resolved from the loaded libcupti.
struct CuptiFunctions {
  void* library = nullptr;
  std::string path;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
};

template <typename Function>
bool resolve(void* library, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, symbol));
  return function != nullptr;
}

// Loads libcupti: the path given (or OPSIGHT_CUPTI_PATH) alone when there is one, else a
// copy already in the process (torch's), else the loader's search and the toolkit folders.
std::optional<std::string> load_cupti(CuptiFunctions& cupti, std::string path) {
  if (path.empty())
    if (const char* from_environment = std::getenv("OPSIGHT_CUPTI_PATH")) path = from_environment;
  std::vector<std::string> candidates;
  if (!path.empty()) {
    candidates.push_back(path);
  } else {
    candidates = {"libcupti.so.13", "libcupti.so",
                  "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                  "/usr/local/cuda/lib64/libcupti.so.13"};
    if (void* loaded = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD)) {
      cupti.library = loaded;
      cupti.path = "libcupti.so.13 (already loaded)";
    }
  }
  std::string tried;
  for (const std::string& candidate : candidates) {
    if (cupti.library != nullptr) break;
    cupti.library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (cupti.library != nullptr) {
      cupti.path = candidate;
      break;
    }
    const char* error = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(error != nullptr ? error : candidate);
  }
  if (cupti.library == nullptr)
    return "libcupti not found (" + tried +
           "); it comes with torch's nvidia-cuda-cupti wheel or a CUDA toolkit: set "
           "OPSIGHT_CUPTI_PATH to it";
  void* library = cupti.library;
  bool complete = resolve(library, "cuptiGetVersion", cupti.get_version) &&
                  resolve(library, "cuptiGetResultString", cupti.result_string) &&
                  resolve(library, "cuptiSubscribe", cupti.subscribe) &&
                  resolve(library, "cuptiUnsubscribe", cupti.unsubscribe) &&
                  resolve(library, "cuptiFinalize", cupti.finalize) &&
                  resolve(library, "cuptiSetThreadIdType", cupti.set_thread_id_type) &&
                  resolve(library, "cuptiGetTimestamp", cupti.get_timestamp) &&
                  resolve(library, "cuptiActivityRegisterCallbacks", cupti.register_callbacks) &&
                  resolve(library, "cuptiActivityEnable", cupti.enable) &&
                  resolve(library, "cuptiActivityDisable", cupti.disable) &&
                  resolve(library, "cuptiActivityFlushAll", cupti.flush_all) &&
                  resolve(library, "cuptiActivityGetNextRecord", cupti.next_record) &&
                  resolve(library, "cuptiActivityGetNumDroppedRecords", cupti.dropped_records) &&
                  resolve(library, "cuptiGetCallbackName", cupti.callback_name);
  // Optional (CUPTI 11.7 and newer): without it the clock offset is measured.
  resolve(library, "cuptiActivityRegisterTimestampCallback", cupti.register_timestamp_callback);
  if (!complete) return cupti.path + " lacks a CUPTI function opsight needs (" + dlerror() + ")";
  return std::nullopt;
}

// The collector of the running session. CUPTI's callbacks are plain functions, so they
// reach it through g_collector (set before CUPTI is told of them, cleared after CUPTI was
// detached).
struct Collector {
  GpuCollectionOptions options;
  CuptiFunctions cupti;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<CUpti_ActivityKind> enabled_kinds;
  bool paused = false;  // the kinds are disabled (pause_gpu_collection)
  std::string collector;
  std::string clock_alignment;
  ClockOffset clock;

  std::mutex mutex;
  std::condition_variable work;
  std::deque<std::pair<uint8_t*, size_t>> completed;  // (buffer, valid bytes)
  std::vector<uint8_t*> free_buffers;
  size_t buffers_allocated = 0;
  bool stopping = false;
  uint64_t dropped_by_cupti = 0;

  GpuActivityLog log;
  std::unique_ptr<CuptiRecordParser> parser;
  std::thread parser_thread;

  ~Collector() {
    for (uint8_t* buffer : free_buffers) std::free(buffer);
  }

  std::string result_text(CUptiResult result) const {
    const char* text = nullptr;
    if (cupti.result_string != nullptr && cupti.result_string(result, &text) == CUPTI_SUCCESS &&
        text != nullptr)
      return text;
    return "CUPTI error " + std::to_string(static_cast<int>(result));
  }

  void parse_buffers() {
    std::unique_lock lock(mutex);
    while (true) {
      work.wait(lock, [&] { return stopping || !completed.empty(); });
      if (completed.empty() && stopping) return;
      auto [buffer, valid_bytes] = completed.front();
      completed.pop_front();
      lock.unlock();
      CUpti_Activity* record = nullptr;
      while (cupti.next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) parser->add(record);
      lock.lock();
      free_buffers.push_back(buffer);
    }
  }
};

Collector* g_collector = nullptr;
std::mutex g_lifecycle;

uint64_t CUPTIAPI monotonic_timestamp() { return monotonic_clock_ns(); }

int64_t cupti_timestamp() {
  uint64_t timestamp = 0;
  g_collector->cupti.get_timestamp(&timestamp);
  return static_cast<int64_t>(timestamp);
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Collector* collector = g_collector;
  *max_records = 0;
  *buffer = nullptr;
  *size = 0;
  if (collector == nullptr) return;
  std::lock_guard lock(collector->mutex);
  if (!collector->free_buffers.empty()) {
    *buffer = collector->free_buffers.back();
    collector->free_buffers.pop_back();
  } else if (collector->buffers_allocated < collector->options.max_buffers) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, collector->options.buffer_bytes));
    if (*buffer != nullptr) ++collector->buffers_allocated;
  }
  // No buffer: CUPTI drops the records and counts them (cuptiActivityGetNumDroppedRecords).
  if (*buffer != nullptr) *size = collector->options.buffer_bytes;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid_bytes) {
  Collector* collector = g_collector;
  if (collector == nullptr) {
    std::free(buffer);
    return;
  }
  size_t dropped = 0;
  if (collector->cupti.dropped_records(context, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
  {
    std::lock_guard lock(collector->mutex);
    collector->dropped_by_cupti += dropped;
    collector->completed.emplace_back(buffer, valid_bytes);
  }
  collector->work.notify_one();
}

std::string cupti_version_text(uint32_t api_version) {
  return "CUPTI API " + std::to_string(api_version);
}

}  // namespace

bool built_with_cuda() { return true; }

bool gpu_collection_running() {
  std::lock_guard lock(g_lifecycle);
  return g_collector != nullptr;
}

std::optional<std::string> start_gpu_collection(const GpuCollectionOptions& options) {
  std::lock_guard lifecycle(g_lifecycle);
  if (g_collector != nullptr) return std::string("GPU tracing already runs in this process");
  auto collector = std::make_unique<Collector>();
  collector->options = options;
  if (auto problem = load_cupti(collector->cupti, options.cupti_path))
    return "GPU tracing off: " + *problem;
  CuptiFunctions& cupti = collector->cupti;
  // The driver first: without it libcupti crashes on its first call (cuptiGetVersion
  // included: seen with CUPTI 13.2 on a machine with no NVIDIA driver).
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
  } else {
    const char* error = dlerror();
    return std::string("GPU tracing off: no NVIDIA driver (") +
           (error != nullptr ? error : "libcuda.so.1") + ")";
  }
  uint32_t api_version = 0;
  cupti.get_version(&api_version);
  if (api_version < CUPTI_API_VERSION)
    return "GPU tracing off: " + cupti.path + " is " + cupti_version_text(api_version) +
           ", older than the CUPTI API " + std::to_string(CUPTI_API_VERSION) +
           " opsight was built with (its records would be misread)";
  CUptiResult result = cupti.subscribe(&collector->subscriber, ignore_callback, nullptr);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    return std::string(
        "GPU tracing off: another CUPTI client is attached (torch.profiler, Nsight Systems or "
        "Nsight Compute); "
        "opsight records everything but the GPU in this session");
  if (result != CUPTI_SUCCESS)
    return "GPU tracing off: CUPTI could not start: " + collector->result_text(result);

  cupti.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);  // gettid, as the recorder's
  if (cupti.register_timestamp_callback != nullptr &&
      cupti.register_timestamp_callback(monotonic_timestamp) == CUPTI_SUCCESS) {
    collector->clock_alignment = "exact: CUPTI's timestamp callback reads CLOCK_MONOTONIC";
  } else {
    g_collector = collector.get();  // cupti_timestamp reads through it
    auto offset = measure_clock_offset(cupti_timestamp, 256);
    g_collector = nullptr;
    collector->clock = offset.value_or(ClockOffset{});
    collector->clock_alignment = "measured offset to CUPTI's clock, +/- " +
                                 std::to_string(collector->clock.uncertainty_ns) + " ns";
  }
  collector->collector = cupti_version_text(api_version) + " (" + cupti.path + ")";
  collector->parser = std::make_unique<CuptiRecordParser>(
      collector->log,
      [functions = &collector->cupti](bool driver, uint32_t cbid) {
        const char* name = nullptr;
        CUpti_CallbackDomain domain =
            driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
        if (functions->callback_name(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr)
          return std::string();
        std::string text(name);
        if (auto version = text.find("_v"); version != std::string::npos && version > 0)
          text.resize(version);
        return text;
      },
      collector->clock, options.max_records);

  g_collector = collector.get();
  result = cupti.register_callbacks(buffer_requested, buffer_completed);
  if (result != CUPTI_SUCCESS) {
    g_collector = nullptr;
    cupti.unsubscribe(collector->subscriber);
    return "GPU tracing off: CUPTI refused its buffers: " + collector->result_text(result);
  }
  const CUpti_ActivityKind kinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MARKER,
      CUPTI_ACTIVITY_KIND_OVERHEAD};
  for (CUpti_ActivityKind kind : kinds) {
    result = cupti.enable(kind);
    if (result == CUPTI_SUCCESS) {
      collector->enabled_kinds.push_back(kind);
    } else if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      for (CUpti_ActivityKind enabled : collector->enabled_kinds) cupti.disable(enabled);
      g_collector = nullptr;
      cupti.unsubscribe(collector->subscriber);
      return "GPU tracing off: CUPTI cannot trace kernels here: " + collector->result_text(result);
    }
  }
  // NVTX reaches CUPTI through NVTX's injection: a program's (or torch's) NVTX markers made
  // after this point become MARKER records, with no change to the program. NVTX reads the
  // variable at its first call, so a range opened before the session stays unseen.
  Dl_info where{};
  if (getenv("NVTX_INJECTION64_PATH") == nullptr &&
      dladdr(reinterpret_cast<void*>(cupti.subscribe), &where) != 0 && where.dli_fname != nullptr)
    setenv("NVTX_INJECTION64_PATH", where.dli_fname, 0);
  Collector* running = collector.release();
  running->parser_thread = std::thread([running] { running->parse_buffers(); });
  return std::nullopt;
}

bool pause_gpu_collection() {
  std::lock_guard lifecycle(g_lifecycle);
  if (g_collector == nullptr) return false;
  if (!g_collector->paused) {
    for (CUpti_ActivityKind kind : g_collector->enabled_kinds) g_collector->cupti.disable(kind);
    g_collector->paused = true;
  }
  return true;
}

bool resume_gpu_collection() {
  std::lock_guard lifecycle(g_lifecycle);
  if (g_collector == nullptr) return false;
  if (g_collector->paused) {
    for (CUpti_ActivityKind kind : g_collector->enabled_kinds) g_collector->cupti.enable(kind);
    g_collector->paused = false;
  }
  return true;
}

GpuCollectionResult stop_gpu_collection() {
  std::lock_guard lifecycle(g_lifecycle);
  GpuCollectionResult result;
  if (g_collector == nullptr) return result;
  std::unique_ptr<Collector> collector(g_collector);
  CuptiFunctions& cupti = collector->cupti;
  cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (!collector->paused)
    for (CUpti_ActivityKind kind : collector->enabled_kinds) cupti.disable(kind);
  cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard lock(collector->mutex);
    collector->stopping = true;
  }
  collector->work.notify_one();
  collector->parser_thread.join();
  cupti.unsubscribe(collector->subscriber);
  // Detaches CUPTI from the program: without it the driver keeps its instrumentation and
  // the program stays slower after the session (pytorch#144455).
  cupti.finalize();
  g_collector = nullptr;
  collector->log.records_dropped_by_cupti += collector->dropped_by_cupti;
  result.log = std::move(collector->log);
  result.collector = collector->collector;
  result.clock_alignment = collector->clock_alignment;
  result.filtered_api_calls = collector->parser->filtered_api_calls();
  return result;
}

}  // namespace opsight::cuda
