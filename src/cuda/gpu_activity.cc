#include "cuda/gpu_activity.hpp"

namespace opsight::cuda {

NameIndex GpuActivityLog::intern(std::string_view name) {
  if (name.empty()) return 0;
  if (name_index_.size() + 1 != names.size()) {  // names filled behind the index's back
    name_index_.clear();
    for (NameIndex index = 1; index < names.size(); ++index)
      name_index_.emplace(names[index], index);
  }
  auto [it, inserted] =
      name_index_.try_emplace(std::string(name), static_cast<NameIndex>(names.size()));
  if (inserted) names.emplace_back(name);
  return it->second;
}

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kPageable:
      return "pageable";
    case MemoryKind::kPinned:
      return "pinned";
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kArray:
      return "array";
    case MemoryKind::kManaged:
      return "managed";
    case MemoryKind::kDeviceStatic:
      return "device static";
    case MemoryKind::kManagedStatic:
      return "managed static";
    case MemoryKind::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view copy_kind_name(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "HtoD";
    case CopyKind::kDeviceToHost:
      return "DtoH";
    case CopyKind::kHostToArray:
      return "HtoA";
    case CopyKind::kArrayToHost:
      return "AtoH";
    case CopyKind::kArrayToArray:
      return "AtoA";
    case CopyKind::kArrayToDevice:
      return "AtoD";
    case CopyKind::kDeviceToArray:
      return "DtoA";
    case CopyKind::kDeviceToDevice:
      return "DtoD";
    case CopyKind::kHostToHost:
      return "HtoH";
    case CopyKind::kPeerToPeer:
      return "PtoP";
    case CopyKind::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view sync_kind_name(SyncKind kind) {
  switch (kind) {
    case SyncKind::kEventSynchronize:
      return "event synchronize";
    case SyncKind::kStreamWaitEvent:
      return "stream wait event";
    case SyncKind::kStreamSynchronize:
      return "stream synchronize";
    case SyncKind::kContextSynchronize:
      return "context synchronize";
    case SyncKind::kUnknown:
      break;
  }
  return "synchronize";
}

}  // namespace opsight::cuda
