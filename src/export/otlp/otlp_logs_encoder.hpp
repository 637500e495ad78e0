// A run's log records (log_view.hpp: the program's logging records with the span open
// where each was logged) as OTLP ExportLogsServiceRequests (protobuf), for `otlp-logs`
// targets: one ResourceLogs per process (the span exporters' resource), in it one
// ScopeLogs per logger (the scope is the logger's name, as OpenTelemetry's logging bridge
// makes it), and per record a LogRecord:
//   time_unix_nano, observed_time_unix_nano  when it was logged (the bridge records it as
//                            the program logs it, so both are that time, to the ns, on
//                            the trace's clock: inside its span's start and end)
//   severity_number          the level mapped as OTel's bridge maps Python's (log_view.hpp)
//   severity_text            the level's name ("WARNING")
//   body                     the message (a string)
//   attributes               logger.name, code.file.path, code.line.number,
//                            code.function.name, exception.type/message/stacktrace, the
//                            program's extra fields, thread.id, thread.name
//   trace_id, span_id, flags the span open there, by the ids the span exporters send it
//                            with, and its W3C trace flags; absent (flags 0) outside spans
//
// Thread-safety: keeps no state; each call writes its own string.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "export/log_view.hpp"

namespace opsight::exporting {

std::string encode_otlp_logs(const LogView& logs, std::span<const uint32_t> records);

}  // namespace opsight::exporting
