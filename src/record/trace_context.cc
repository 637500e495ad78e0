// W3C trace context for the recorder: parsing and formatting traceparent headers, and the
// two events that tie a recorded span to a trace begun elsewhere (kSpanContext; one with
// no parent span begins a trace of its own) or give it the id a callee was told
// (kSpanId). See opsight.hpp for the contract.
#include <atomic>
#include <cstring>

#include "opsight/opsight.hpp"
#include "record/registry.hpp"

namespace opsight {

namespace {

bool parse_hex(std::string_view text, uint64_t* value) {
  uint64_t result = 0;
  for (char character : text) {
    int digit;
    if (character >= '0' && character <= '9')
      digit = character - '0';
    else if (character >= 'a' && character <= 'f')
      digit = character - 'a' + 10;
    else
      return false;  // the specification allows lowercase only
    result = (result << 4) | static_cast<uint64_t>(digit);
  }
  *value = result;
  return true;
}

void append_hex(std::string& out, uint64_t value, int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kDigits[(value >> shift) & 0xF];
}

}  // namespace

std::optional<TraceContext> parse_traceparent(std::string_view header) {
  // Surrounding spaces and tabs are allowed in a header value.
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t'))
    header.remove_prefix(1);
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t'))
    header.remove_suffix(1);
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (header.size() < 55 || header[2] != '-' || header[35] != '-' || header[52] != '-')
    return std::nullopt;
  uint64_t version = 0, high = 0, low = 0, span = 0, flags = 0;
  if (!parse_hex(header.substr(0, 2), &version) || version == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may add fields after a '-'.
  if (version == 0 ? header.size() != 55 : (header.size() > 55 && header[55] != '-'))
    return std::nullopt;
  if (!parse_hex(header.substr(3, 16), &high) || !parse_hex(header.substr(19, 16), &low) ||
      !parse_hex(header.substr(36, 16), &span) || !parse_hex(header.substr(53, 2), &flags))
    return std::nullopt;
  TraceContext context{high, low, span, static_cast<uint8_t>(flags)};
  if (!context.valid()) return std::nullopt;
  return context;
}

std::string format_traceparent(const TraceContext& context) {
  std::string out = "00-";
  out.reserve(55);
  append_hex(out, context.trace_id_high, 16);
  append_hex(out, context.trace_id_low, 16);
  out += '-';
  append_hex(out, context.span_id, 16);
  out += '-';
  append_hex(out, context.trace_flags, 2);
  return out;
}

TraceContext begin_trace(uint8_t trace_flags) {
  if (!recording()) return {0, 0, 0, trace_flags};
  // Two flow ids: each unique across threads, processes and runs (a random salt), so the
  // pair is too; never all zero.
  TraceContext context{new_flow_id(), new_flow_id(), 0, trace_flags};
  join_remote_trace(context);  // a span context with no parent span: the trace's root
  return context;
}

namespace {

// A kSpanContext event (two slots) for the innermost open span, or with
// format::kSpanContextOnRoot for the outermost.
void write_span_context(const TraceContext& remote, uint32_t binding) {
  if (!recording()) return;
  format::Slot* slot = internal::reserve(2);
  if (slot == nullptr) [[unlikely]]
    return;
  internal::write_slot(
      slot, remote.span_id,
      internal::slot_word(binding, format::SlotKind::kSpanContext, remote.trace_flags, 1));
  slot[1] = format::Slot{};
  std::memcpy(&slot[1], &remote.trace_id_high, 8);
  std::memcpy(reinterpret_cast<char*>(&slot[1]) + 8, &remote.trace_id_low, 8);
  internal::commit(2);
}

}  // namespace

void join_remote_trace(const TraceContext& remote) { write_span_context(remote, 0); }

void set_span_id(uint64_t span_id) {
  if (!recording() || span_id == 0) return;
  if (format::Slot* slot = internal::reserve(1)) [[likely]] {
    internal::write_slot(slot, span_id, internal::slot_word(0, format::SlotKind::kSpanId));
    internal::commit(1);
  }
}

TraceContext session_trace_id() {
  record::Registry& reg = record::registry();
  if (!reg.session_running.load(std::memory_order_relaxed)) return {0, 0, 0, 1};
  return {reg.trace_id_high.load(std::memory_order_relaxed),
          reg.trace_id_low.load(std::memory_order_relaxed), 0, 1};
}

TraceContext join_session_trace() {
  TraceContext session = session_trace_id();
  if (!recording() || (session.trace_id_high | session.trace_id_low) == 0) return session;
  write_span_context(session, format::kSpanContextOnRoot);
  return session;
}

}  // namespace opsight
