// Field numbers and enum values of Perfetto's trace protos (protos/perfetto/trace/ in the
// Perfetto repository: trace.proto, trace_packet.proto, clock_snapshot.proto,
// interned_data/interned_data.proto, track_event/{track_event,track_descriptor,
// process_descriptor,thread_descriptor,counter_descriptor,debug_annotation}.proto), each
// under the message that declares it. They are facts of the published format, checked
// against the descriptors of the `perfetto` PyPI package (perfetto_trace_pb2, version
// 0.59.1) by python/tests/test_perfetto_output.py.
#pragma once

#include <cstdint>

namespace opsight::io::perfetto::fields {

// message Trace
inline constexpr uint32_t kTracePacket = 1;  // repeated TracePacket packet

// message TracePacket
namespace packet {
inline constexpr uint32_t kClockSnapshot = 6;
inline constexpr uint32_t kTimestamp = 8;                 // uint64
inline constexpr uint32_t kTrustedPacketSequenceId = 10;  // uint32
inline constexpr uint32_t kTrackEvent = 11;
inline constexpr uint32_t kInternedData = 12;
inline constexpr uint32_t kSequenceFlags = 13;            // uint32, SequenceFlags
inline constexpr uint32_t kIncrementalStateCleared = 41;  // bool
inline constexpr uint32_t kTracePacketDefaults = 59;
inline constexpr uint32_t kTrackDescriptor = 60;
inline constexpr uint32_t kProcessDescriptor = 43;      // legacy, per sequence
inline constexpr uint32_t kThreadDescriptor = 44;       // legacy, per sequence
inline constexpr uint32_t kTimestampClockId = 58;       // uint32
inline constexpr uint32_t kFirstPacketOnSequence = 87;  // bool
// enum TracePacket.SequenceFlags
inline constexpr uint64_t kSeqIncrementalStateCleared = 1;
inline constexpr uint64_t kSeqNeedsIncrementalState = 2;
}  // namespace packet

// message TracePacketDefaults
namespace packet_defaults {
inline constexpr uint32_t kTimestampClockId = 58;  // uint32
inline constexpr uint32_t kTrackEventDefaults = 11;
}  // namespace packet_defaults

// message TrackEventDefaults
namespace event_defaults {
inline constexpr uint32_t kTrackUuid = 11;
inline constexpr uint32_t kExtraCounterTrackUuids = 31;        // repeated uint64
inline constexpr uint32_t kExtraDoubleCounterTrackUuids = 45;  // repeated uint64
}  // namespace event_defaults

// message ClockSnapshot { repeated Clock clocks = 1; optional BuiltinClock
// primary_trace_clock = 2; } and ClockSnapshot.Clock
namespace clock_snapshot {
inline constexpr uint32_t kClocks = 1;
inline constexpr uint32_t kPrimaryTraceClock = 2;
inline constexpr uint32_t kClockId = 1;           // Clock.clock_id
inline constexpr uint32_t kTimestamp = 2;         // Clock.timestamp
inline constexpr uint32_t kIsIncremental = 3;     // Clock.is_incremental
inline constexpr uint32_t kUnitMultiplierNs = 4;  // Clock.unit_multiplier_ns
}  // namespace clock_snapshot

// enum BuiltinClock (builtin_clock.proto)
inline constexpr uint64_t kBuiltinClockRealtime = 1;
inline constexpr uint64_t kBuiltinClockMonotonic = 3;
inline constexpr uint64_t kBuiltinClockBoottime = 6;
// Clock ids 64..127 are scoped to their packet sequence (the SDK's incremental clock).
inline constexpr uint64_t kFirstSequenceScopedClock = 64;
inline constexpr uint64_t kLastSequenceScopedClock = 127;

// message TrackDescriptor
namespace track {
inline constexpr uint32_t kUuid = 1;  // uint64
inline constexpr uint32_t kName = 2;
inline constexpr uint32_t kProcess = 3;  // ProcessDescriptor
inline constexpr uint32_t kThread = 4;   // ThreadDescriptor
inline constexpr uint32_t kParentUuid = 5;
inline constexpr uint32_t kCounter = 8;  // CounterDescriptor
inline constexpr uint32_t kStaticName = 10;
inline constexpr uint32_t kChildOrdering = 11;     // ChildTracksOrdering
inline constexpr uint32_t kSiblingOrderRank = 12;  // int32
inline constexpr uint32_t kProcessOrdering = 19;   // ProcessOrdering (on the root, uuid 0)
inline constexpr uint32_t kThreadOrdering = 20;    // ThreadOrdering (on the root, uuid 0)
// enum ChildTracksOrdering, ProcessOrdering, ThreadOrdering
inline constexpr uint64_t kChildOrderingExplicit = 3;
inline constexpr uint64_t kProcessOrderingExplicit = 1;
inline constexpr uint64_t kThreadOrderingExplicit = 1;
}  // namespace track

// message ProcessDescriptor
namespace process {
inline constexpr uint32_t kPid = 1;              // int32
inline constexpr uint32_t kCmdline = 2;          // repeated string
inline constexpr uint32_t kLegacySortIndex = 3;  // int32
inline constexpr uint32_t kProcessName = 6;
inline constexpr uint32_t kProcessLabels = 8;  // repeated string
}  // namespace process

// message ThreadDescriptor
namespace thread {
inline constexpr uint32_t kPid = 1;              // int32
inline constexpr uint32_t kTid = 2;              // int32
inline constexpr uint32_t kLegacySortIndex = 3;  // int32
inline constexpr uint32_t kThreadName = 5;
inline constexpr uint32_t kReferenceTimestampUs = 6;  // int64, legacy
}  // namespace thread

// message CounterDescriptor
namespace counter {
inline constexpr uint32_t kType = 1;            // BuiltinCounterType
inline constexpr uint32_t kUnit = 3;            // Unit
inline constexpr uint32_t kUnitName = 6;        // string, for units the enum lacks
inline constexpr uint32_t kUnitMultiplier = 4;  // int64
inline constexpr uint32_t kIsIncremental = 5;   // bool
// enum CounterDescriptor.BuiltinCounterType
inline constexpr uint64_t kTypeThreadTimeNs = 1;
inline constexpr uint64_t kTypeThreadInstructionCount = 2;
// enum CounterDescriptor.Unit
inline constexpr uint64_t kUnitTimeNs = 1;
inline constexpr uint64_t kUnitCount = 2;
inline constexpr uint64_t kUnitSizeBytes = 3;
}  // namespace counter

// message TrackEvent
namespace event {
inline constexpr uint32_t kTimestampDeltaUs = 1;  // int64, legacy
inline constexpr uint32_t kLegacyEvent = 6;
inline constexpr uint32_t kExtraCounterValues = 12;   // repeated int64
inline constexpr uint32_t kTimestampAbsoluteUs = 16;  // int64, legacy
inline constexpr uint32_t kCategories = 22;           // repeated string
inline constexpr uint32_t kName = 23;
inline constexpr uint32_t kCounterValue = 30;                  // int64
inline constexpr uint32_t kExtraCounterTrackUuids = 31;        // repeated uint64
inline constexpr uint32_t kFlowIdsOld = 36;                    // repeated uint64
inline constexpr uint32_t kTerminatingFlowIdsOld = 42;         // repeated uint64
inline constexpr uint32_t kExtraDoubleCounterTrackUuids = 45;  // repeated uint64
inline constexpr uint32_t kExtraDoubleCounterValues = 46;      // repeated double
inline constexpr uint32_t kCategoryIids = 3;                   // repeated uint64
inline constexpr uint32_t kDebugAnnotations = 4;
inline constexpr uint32_t kType = 9;
inline constexpr uint32_t kNameIid = 10;
inline constexpr uint32_t kTrackUuid = 11;
inline constexpr uint32_t kDoubleCounterValue = 44;
inline constexpr uint32_t kFlowIds = 47;             // repeated fixed64
inline constexpr uint32_t kTerminatingFlowIds = 48;  // repeated fixed64
// enum TrackEvent.Type
inline constexpr uint64_t kTypeSliceBegin = 1;
inline constexpr uint64_t kTypeSliceEnd = 2;
inline constexpr uint64_t kTypeInstant = 3;
inline constexpr uint64_t kTypeCounter = 4;
}  // namespace event

// message TrackEvent.LegacyEvent
namespace legacy_event {
inline constexpr uint32_t kNameIid = 1;
inline constexpr uint32_t kPhase = 2;       // int32, a Chrome JSON phase character
inline constexpr uint32_t kDurationUs = 3;  // int64
inline constexpr uint32_t kBindId = 8;      // uint64
inline constexpr uint32_t kFlowDirection = 13;
inline constexpr uint32_t kPidOverride = 18;  // int32
inline constexpr uint32_t kTidOverride = 19;  // int32
// enum LegacyEvent.FlowDirection
inline constexpr uint64_t kFlowIn = 1;
inline constexpr uint64_t kFlowOut = 2;
inline constexpr uint64_t kFlowInOut = 3;
}  // namespace legacy_event

// message DebugAnnotation
namespace annotation {
inline constexpr uint32_t kNameIid = 1;
inline constexpr uint32_t kBoolValue = 2;
inline constexpr uint32_t kUintValue = 3;    // uint64
inline constexpr uint32_t kIntValue = 4;     // int64
inline constexpr uint32_t kDoubleValue = 5;  // double
inline constexpr uint32_t kStringValue = 6;
inline constexpr uint32_t kPointerValue = 7;  // uint64
inline constexpr uint32_t kNestedValue = 8;   // NestedValue
inline constexpr uint32_t kLegacyJsonValue = 9;
inline constexpr uint32_t kName = 10;
inline constexpr uint32_t kDictEntries = 11;  // repeated DebugAnnotation
inline constexpr uint32_t kArrayValues = 12;  // repeated DebugAnnotation
inline constexpr uint32_t kProtoTypeNameIid = 13;
inline constexpr uint32_t kProtoValue = 14;  // bytes
inline constexpr uint32_t kProtoTypeName = 16;
inline constexpr uint32_t kStringValueIid = 17;
}  // namespace annotation

// message DebugAnnotation.NestedValue
namespace nested {
inline constexpr uint32_t kNestedType = 1;  // 1: dict, 2: array
inline constexpr uint32_t kDictKeys = 2;
inline constexpr uint32_t kDictValues = 3;
inline constexpr uint32_t kArrayValues = 4;
inline constexpr uint32_t kIntValue = 5;
inline constexpr uint32_t kDoubleValue = 6;
inline constexpr uint32_t kBoolValue = 7;
inline constexpr uint32_t kStringValue = 8;
inline constexpr uint64_t kTypeDict = 1;
inline constexpr uint64_t kTypeArray = 2;
}  // namespace nested

// message InternedData; every entry (EventCategory, EventName, DebugAnnotationName,
// InternedString) is { uint64 iid = 1; string name (or str) = 2; }
namespace interned {
inline constexpr uint32_t kEventCategories = 1;
inline constexpr uint32_t kEventNames = 2;
inline constexpr uint32_t kDebugAnnotationNames = 3;
inline constexpr uint32_t kDebugAnnotationStringValues = 29;
inline constexpr uint32_t kIid = 1;
inline constexpr uint32_t kName = 2;
}  // namespace interned

}  // namespace opsight::io::perfetto::fields
