// The names under which a program's log records travel through a trace, shared by their
// writer (the Python package's logging bridge, opsight.integrations.logs, through
// _native.log_record) and their readers (the export module's LogView, the OTLP and Loki
// log sinks, Trace.log_records()).
//
// A log record is an instant in category kLogCategory, at the time it was logged, on a
// lane of the thread that logged it kept for log records (key kLogLaneKey, named "logs"),
// with the key of the track it was logged on (log.lane: 0 the thread's own, else an
// asyncio task's lane): the span open on that track at that time is the record's span.
// (A lane of their own because an argument that follows an instant is the instant's until
// the lane's next begin or end: on the span's own track, the arguments a span gets after a
// record logged in it, an exception's at its end among them, would go to the record.)
// The instant's name is the level's name ("WARNING"); its arguments:
//   log.level       int     the level's number on Python's scale (10 DEBUG, 20 INFO,
//                           30 WARNING, 40 ERROR, 50 CRITICAL; other sources map onto it)
//   log.lane        int     the key of the track it was logged on (absent: the instant's
//                           own track is)
//   log.message     string  the message, formatted
//   logger.name     string  the logger's name ("app.db"; "root")
//   code.file.path, code.line.number, code.function.name   where it was logged
//   code.stacktrace string  the stack the program asked for (stack_info=True), if any
//   exception.type, exception.message, exception.stacktrace  the exception logged with it
// and any other argument: a field the program added to the record (logging's `extra=`).
// The code.* and exception.* keys are OpenTelemetry's semantic conventions, as its logging
// bridge sends them; every argument but log.level, log.lane and log.message is sent as an
// attribute.
#pragma once

#include <cstdint>
#include <string_view>

namespace opsight::schema {

inline constexpr std::string_view kLogCategory = "log";
inline constexpr std::string_view kLogLevel = "log.level";
inline constexpr std::string_view kLogMessage = "log.message";
inline constexpr std::string_view kLogLoggerName = "logger.name";
inline constexpr std::string_view kLogLane = "log.lane";

// The lane key of a thread's log records, and its name: bit 63 set, so it is no address
// (an asyncio task's lane key is its task object's address).
inline constexpr uint64_t kLogLaneKey = 0x8000'0000'006c'6f67;  // "log"
inline constexpr std::string_view kLogLaneName = "logs";

// Python's level numbers.
inline constexpr int64_t kLogLevelDebug = 10;
inline constexpr int64_t kLogLevelInfo = 20;
inline constexpr int64_t kLogLevelWarning = 30;
inline constexpr int64_t kLogLevelError = 40;
inline constexpr int64_t kLogLevelCritical = 50;

}  // namespace opsight::schema
