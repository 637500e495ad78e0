// The one decoder of a kEvents chunk's slots: every reader of the native format (the
// whole-file reader, the live tail, the streaming paths) walks a thread's events through
// decode_slots(), so that they agree on what each slot means: the full ticks of a packed
// async event, which events are stale (written before the session's first clock sync, and
// the id events and args after them), the bytes of an inline name, an argument's value, and
// the span ids derived for spans the file does not give an id. What an event *does* (nest
// on a lane, attach to an instant, pair across threads) stays with each reader: they build
// different things.
//
// decode_slots() calls `on_event(const SlotEvent&)` for each event that is not stale, in
// file order, and a kTrack event always (it carries no time). It is a template so that the
// reader's switch inlines into the loop (the reader decodes at GB/s).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "io/native/derived_span_id.hpp"
#include "opsight/internal/native_layout.hpp"
#include "trace/trace.hpp"

namespace opsight::io::native {

// One decoded event. Only the fields named for its kind hold anything: the others keep
// whatever an earlier event left there (the decoder reuses one event).
struct SlotEvent {
  // The kinds of the format, with the packed async forms read as kAsyncBegin/kAsyncEnd.
  format::SlotKind kind = format::SlotKind::kBegin;
  // kBegin, kEnd, kInstant, kCounter, kAsyncBegin, kAsyncEnd: the full ticks. kArg: the
  // ticks of the thread's last timed event.
  uint64_t ticks = 0;
  // kBegin, kInstant, kAsyncBegin: the name's id in kNames, or 0 with the name in `text`.
  // kSpanContext: which open span it binds to (0: the innermost, or
  // format::kSpanContextOnRoot).
  uint32_t name_id = 0;
  // Inline name (begin, instant, async begin), track name, counter name, argument key.
  std::string_view text;
  // kArg of type kString: the value.
  std::string_view string_value;
  // kAsyncBegin/kAsyncEnd: the async id; kFlow: the flow id; kTrack: the key; kSpanId: the
  // span id; kSpanContext: the remote parent's span id.
  uint64_t id = 0;
  // kBegin: the span id derived for it (a kSpanId event after it may replace it);
  // kAsyncBegin: the async span's derived id.
  uint64_t span_id = 0;
  // kInstant: the scope; kFlow: the direction (with kFlowOnAsyncBegin); kSpanContext: the
  // W3C trace flags; kArg: the trace::ArgType.
  uint8_t detail = 0;
  // kEnd, kAsyncEnd: the span did not really end here (its end was dropped and written
  // late, or it never ended in the trace this file was converted from).
  bool unfinished = false;
  bool late = false;  // kEnd: written late after drops (counted apart by the reader)
  // kCounter: the sample.
  double value = 0;
  // kArg: the value (int, double or bool; a string's is `string_value`).
  trace::ArgValue arg;
  // kSpanContext: the trace the span joins.
  trace::TraceId trace_id;
  // The event lacks the payload its kind needs (or has an unknown kind or argument type):
  // readers count it as undecodable and otherwise ignore it.
  bool malformed = false;
};

// A kSpanContext event for the lane's outermost open span (opsight::join_session_trace:
// the root, and what is under it, stay in the session's trace). Every other span context
// binds to the innermost open span.
inline bool binds_to_root(const SlotEvent& event) {
  return event.kind == format::SlotKind::kSpanContext &&
         event.name_id == format::kSpanContextOnRoot;
}

// What decoding a thread's next chunk needs from its previous ones.
struct ThreadSlotState {
  uint64_t last_ticks = 0;  // the thread's last timed event: packed ticks' reference
  bool has_last_ticks = false;
  bool skipping_stale = false;  // the last timed event came before the session
  uint64_t begins = 0;          // the thread's begins so far: derived span ids
  uint64_t async_begins = 0;    // its async begins so far: derived async span ids
};

// What decoding needs from the file: the thread's index, the session's first clock sync
// (events before it are stale; packed ticks are read against it before a thread's first
// timed event) and the salt of derived span ids.
struct SlotFileContext {
  uint32_t thread_index = 0;
  bool has_session_start = false;
  uint64_t session_start_ticks = 0;
  uint64_t span_salt = 0;
};

// An inline string: `length` bytes of the `slots` payload slots at `bytes`, cut to them.
inline std::string_view inline_text(const char* bytes, uint32_t length, uint32_t slots) {
  return std::string_view(bytes, std::min<size_t>(length, size_t{slots} * sizeof(format::Slot)));
}

// Decodes `slot_count` slots at `slots` (one kEvents chunk's payload after its header).
// Returns slot_count, or the index of the slot whose payload runs past the chunk (where
// decoding stopped: damage).
template <typename OnEvent>
__attribute__((always_inline)) inline uint32_t decode_slots(const char* slots, uint32_t slot_count,
                                                            ThreadSlotState& thread_state,
                                                            const SlotFileContext& file,
                                                            OnEvent&& on_event) {
  using format::Slot;
  using format::SlotKind;
  uint32_t index = 0;
  // One event, reused: each kind sets every field documented for it (zeroing the whole
  // event per slot cost the reader 40% of its decoding time).
  SlotEvent event;
  // A local copy, kept in registers across the visitor's calls; written back at the end.
  ThreadSlotState state = thread_state;
  // A timed event's ticks (packed or whole): the thread's last time, and whether the event
  // came before the session (stale: skipped, with the id events and args after it).
  auto is_fresh = [&](uint64_t ticks) __attribute__((always_inline)) {
    state.last_ticks = ticks;
    state.has_last_ticks = true;
    state.skipping_stale = file.has_session_start && ticks < file.session_start_ticks;
    if (state.skipping_stale) return false;
    event.ticks = ticks;
    return true;
  };
  while (index < slot_count) {
    Slot slot;
    std::memcpy(&slot, slots + size_t{index} * sizeof(Slot), sizeof(Slot));
    const uint32_t extra = format::extra_slots_of(slot);
    if (extra > slot_count - index - 1) break;
    const char* payload = slots + size_t{index + 1} * sizeof(Slot);
    index += 1 + extra;
    event.kind = static_cast<SlotKind>(slot.kind);
    event.malformed = false;
    switch (event.kind) {
      // The kinds most events are first, each dispatched once.
      case SlotKind::kBegin:
        if (!is_fresh(slot.ticks)) continue;
        event.name_id = slot.id;
        event.text = {};
        event.span_id = derived_span_id(file.thread_index, ++state.begins, file.span_salt);
        on_event(event);
        continue;
      case SlotKind::kEnd:
        if (!is_fresh(slot.ticks)) continue;
        event.late = slot.arg_type == format::kEndIsLate;
        event.unfinished = event.late || slot.arg_type == format::kEndOfUnfinished;
        on_event(event);
        continue;
      case SlotKind::kTrack:  // ticks is the key, not a time: never stale
        event.id = slot.ticks;
        event.text = inline_text(payload, slot.id, extra);
        on_event(event);
        continue;
      case SlotKind::kFlow:  // ticks is the flow id, not a time
        if (state.skipping_stale) continue;
        event.id = slot.ticks;
        event.detail = slot.arg_type;
        event.ticks = state.last_ticks;
        on_event(event);
        continue;
      case SlotKind::kSpanId:  // ticks is an id
        if (state.skipping_stale) continue;
        event.id = slot.ticks;
        on_event(event);
        continue;
      case SlotKind::kSpanContext:
        if (state.skipping_stale) continue;
        event.id = slot.ticks;
        event.name_id = slot.id;  // the binding: 0, or format::kSpanContextOnRoot
        event.detail = slot.arg_type;
        event.trace_id = {};
        if (extra >= 1) {
          std::memcpy(&event.trace_id.high, payload, 8);
          std::memcpy(&event.trace_id.low, payload + 8, 8);
        } else {
          event.malformed = true;
        }
        on_event(event);
        continue;
      case SlotKind::kArg: {
        if (state.skipping_stale) continue;  // the args of a stale event are stale
        event.ticks = state.last_ticks;
        event.detail = slot.arg_type;
        event.string_value = {};
        event.arg = {};
        uint32_t key_length = slot.id & 0xFFFF;
        uint32_t string_length = slot.id >> 16;
        if (key_length + size_t{string_length} > size_t{extra} * sizeof(Slot)) {
          event.malformed = true;
          on_event(event);
          continue;
        }
        event.text = std::string_view(payload, key_length);
        event.arg.type = static_cast<trace::ArgType>(slot.arg_type);
        switch (event.arg.type) {
          case trace::ArgType::kInt:
          case trace::ArgType::kBool:
            event.arg.int_value = static_cast<int64_t>(slot.ticks);
            break;
          case trace::ArgType::kDouble:
            std::memcpy(&event.arg.double_value, &slot.ticks, 8);
            break;
          case trace::ArgType::kString:
            event.string_value = std::string_view(payload + key_length, string_length);
            break;
          default:
            event.malformed = true;
            break;
        }
        on_event(event);
        continue;
      }
      default:
        break;
    }
    // A timed event: its full ticks, and whether it was written before the session.
    uint64_t ticks = slot.ticks;
    if (format::is_packed_async(slot.kind))
      ticks = format::unpack_async_ticks(
          format::packed_async_ticks_low(slot),
          state.has_last_ticks ? state.last_ticks : file.session_start_ticks);
    if (!is_fresh(ticks)) continue;
    switch (event.kind) {
      case SlotKind::kBeginNamed:
        event.kind = SlotKind::kBegin;
        event.name_id = 0;
        event.text = inline_text(payload, slot.id, extra);
        event.span_id = derived_span_id(file.thread_index, ++state.begins, file.span_salt);
        on_event(event);
        continue;
      case SlotKind::kInstant:
      case SlotKind::kInstantNamed:
        event.name_id = event.kind == SlotKind::kInstant ? slot.id : 0;
        event.text = event.kind == SlotKind::kInstant ? std::string_view()
                                                      : inline_text(payload, slot.id, extra);
        event.kind = SlotKind::kInstant;
        event.detail = slot.arg_type;
        break;
      case SlotKind::kCounter:
        if (extra < 1) {
          event.malformed = true;
          break;
        }
        std::memcpy(&event.value, payload, sizeof(event.value));
        event.text = inline_text(payload + sizeof(Slot), slot.id, extra - 1);
        break;
      case SlotKind::kAsyncBegin:
        if (extra < 1) {
          event.malformed = true;
          break;
        }
        std::memcpy(&event.id, payload, sizeof(event.id));
        event.name_id = slot.arg_type == format::kAsyncNameId ? slot.id : 0;
        event.text = slot.arg_type == format::kAsyncNameId
                         ? std::string_view()
                         : inline_text(payload + sizeof(Slot), slot.id, extra - 1);
        event.span_id =
            derived_async_span_id(file.thread_index, ++state.async_begins, file.span_salt);
        break;
      case SlotKind::kAsyncBeginPacked:
        event.kind = SlotKind::kAsyncBegin;
        event.id = slot.ticks >> 24;
        event.name_id = static_cast<uint32_t>(slot.ticks & (format::kPackedNameIdLimit - 1));
        event.text = {};
        event.span_id =
            derived_async_span_id(file.thread_index, ++state.async_begins, file.span_salt);
        break;
      case SlotKind::kAsyncEnd:
        if (extra < 1) {
          event.malformed = true;
          break;
        }
        std::memcpy(&event.id, payload, sizeof(event.id));
        event.unfinished = slot.arg_type == format::kEndOfUnfinished;
        break;
      case SlotKind::kAsyncEndPacked:
        event.kind = SlotKind::kAsyncEnd;
        event.id = slot.ticks;
        event.unfinished = false;
        break;
      default:
        event.malformed = true;  // a kind from a newer writer, or damage
        break;
    }
    on_event(event);
  }
  thread_state = state;
  return index;
}

}  // namespace opsight::io::native
