#include "io/chrome_json/chrome_json_decode.hpp"

// xxHash compiled into this file (header-only mode): the local string table hashes a short
// string per name, category and argument key of every event, and a call into the shared
// library cost more than the hash itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace opsight::io::chrome_json {
namespace {

constexpr size_t kInitialSlots = 256;

// The fields of one event, gathered in one pass over its members (their order is free).
struct EventFields {
  std::string_view phase;
  std::string_view name;
  std::string_view category;
  element ts;
  element dur;
  element pid;
  element tid;
  element args;
  element id;                      // "id"
  element id2;                     // "id2": {"local": ...} or {"global": ...}
  element bind_id;                 // v2 flows
  std::string_view scope;          // "s" of an instant
  std::string_view binding_point;  // "bp" of a flow end
  bool flow_in = false;
  bool flow_out = false;
  bool has_id = false;
  bool has_id2 = false;
  bool has_bind_id = false;
  bool has_phase = false;
  bool has_ts = false;
  bool has_dur = false;
  bool has_pid = false;
  bool has_tid = false;
  bool has_args = false;
};

void gather_fields(simdjson::dom::object event, EventFields& fields) {
  for (auto [key, value] : event) {
    switch (key.size()) {
      case 1:
        if (key[0] == 's' && value.get(fields.scope) != simdjson::SUCCESS) fields.scope = {};
        break;
      case 2:
        if (equals_literal(key, "ph")) {
          fields.has_phase = value.get(fields.phase) == simdjson::SUCCESS;
        } else if (equals_literal(key, "ts")) {
          fields.ts = value;
          fields.has_ts = true;
        } else if (equals_literal(key, "id")) {
          fields.id = value;
          fields.has_id = true;
        } else if (equals_literal(key, "bp")) {
          if (value.get(fields.binding_point) != simdjson::SUCCESS) fields.binding_point = {};
        }
        break;
      case 3:
        if (equals_literal(key, "cat")) {
          if (value.get(fields.category) != simdjson::SUCCESS) fields.category = {};
        } else if (equals_literal(key, "dur")) {
          fields.dur = value;
          fields.has_dur = true;
        } else if (equals_literal(key, "pid")) {
          fields.pid = value;
          fields.has_pid = true;
        } else if (equals_literal(key, "tid")) {
          fields.tid = value;
          fields.has_tid = true;
        } else if (equals_literal(key, "id2")) {
          fields.id2 = value;
          fields.has_id2 = true;
        }
        break;
      case 4:
        if (equals_literal(key, "name")) {
          if (value.get(fields.name) != simdjson::SUCCESS) fields.name = {};
        } else if (equals_literal(key, "args")) {
          fields.args = value;
          fields.has_args = true;
        }
        break;
      case 7:
        if (equals_literal(key, "bind_id")) {
          fields.bind_id = value;
          fields.has_bind_id = true;
        } else if (equals_literal(key, "flow_in")) {
          fields.flow_in = value.type() == element_type::BOOL && value.get_bool().value_unsafe();
        }
        break;
      case 8:
        if (equals_literal(key, "flow_out"))
          fields.flow_out = value.type() == element_type::BOOL && value.get_bool().value_unsafe();
        break;
      default:
        break;
    }
  }
}

// A pid or tid: a number (a double is truncated, one out of range is 0), or a string,
// which is kept as text for the merge to give a number (its digits, or one derived from a
// hash that must not clash with the others: that needs the whole file's state).
// Anything else, or a missing one, is 0.
void resolve_id(element value, bool present, int64_t* number, uint32_t* text, uint16_t text_flag,
                uint16_t* flags, LocalStrings& strings) {
  *number = 0;
  if (!present) return;
  switch (value.type()) {
    case element_type::INT64:
      *number = value.get_int64().value_unsafe();
      return;
    case element_type::UINT64:
      *number = static_cast<int64_t>(value.get_uint64().value_unsafe());
      return;
    case element_type::DOUBLE: {
      double decimal = value.get_double().value_unsafe();
      if (std::fabs(decimal) < 9.2e18) *number = static_cast<int64_t>(decimal);
      return;
    }
    case element_type::STRING:
      *text = strings.intern(value.get_string().value_unsafe());
      *flags |= text_flag;
      return;
    default:
      return;
  }
}

// process_name / thread_name: {"name": "..."}. opsight's writer gives an async lane a
// synthetic tid and names it with a thread_name event whose args also hold the lane's key
// ("opsight.async_key", hex) and its thread's real tid ("opsight.tid"): the key goes to
// span_id and the tid to the event's one arg (kInt, or kString for a tid given as text).
void decode_metadata(const EventFields& fields, bool written_by_opsight, DecodedEvent& event,
                     DecodedEvents& out) {
  event.kind = EventKind::kIgnored;
  if (!fields.has_args || fields.args.type() != element_type::OBJECT) return;
  LocalStrings& strings = out.strings;
  const bool process_sort = fields.name == "process_sort_index";
  if (process_sort || fields.name == "thread_sort_index") {
    element index;
    std::optional<double> number;
    if (fields.args["sort_index"].get(index) != simdjson::SUCCESS ||
        !(number = numeric_value(index)) || !(std::fabs(*number) < 9.2e18))
      return;
    event.kind = process_sort ? EventKind::kProcessSortIndex : EventKind::kThreadSortIndex;
    event.dur = static_cast<int64_t>(*number);
    resolve_id(fields.pid, fields.has_pid, &event.pid, &event.pid_text, kPidIsText, &event.flags,
               strings);
    if (!fields.has_tid) event.flags |= kNoTid;
    resolve_id(fields.tid, fields.has_tid, &event.tid, &event.tid_text, kTidIsText, &event.flags,
               strings);
    return;
  }
  if (fields.name == "process_labels") {
    std::string_view labels;
    if (fields.args["labels"].get(labels) != simdjson::SUCCESS) return;
    event.kind = EventKind::kProcessLabels;
    event.name = strings.intern(labels);
    resolve_id(fields.pid, fields.has_pid, &event.pid, &event.pid_text, kPidIsText, &event.flags,
               strings);
    return;
  }
  if (written_by_opsight && fields.name == "opsight_async_track") {
    std::string_view name;
    std::string_view key_text;
    element written_id;
    element sort_index;
    if (fields.args["name"].get(name) != simdjson::SUCCESS ||
        fields.args["opsight.async_key"].get(key_text) != simdjson::SUCCESS ||
        fields.args["opsight.id"].get(written_id) != simdjson::SUCCESS ||
        written_id.type() != element_type::INT64)
      return;
    auto key = parse_hex64(key_text);
    if (!key) return;
    event.kind = EventKind::kAsyncTrackName;
    event.name = strings.intern(name);
    event.span_id = static_cast<uint64_t>(written_id.get_int64().value_unsafe());
    if (fields.args["sort_index"].get(sort_index) == simdjson::SUCCESS &&
        sort_index.type() == element_type::INT64)
      event.dur = sort_index.get_int64().value_unsafe();
    resolve_id(fields.pid, fields.has_pid, &event.pid, &event.pid_text, kPidIsText, &event.flags,
               strings);
    EventExtra extra;
    extra.key = *key;
    out.extras.push_back(extra);
    event.flags |= kHasExtra;
    return;
  }
  const bool process_name = fields.name == "process_name";
  if (!process_name && fields.name != "thread_name") return;
  std::string_view name;
  if (fields.args["name"].get(name) != simdjson::SUCCESS) return;
  event.kind = process_name ? EventKind::kProcessName : EventKind::kThreadName;
  event.name = strings.intern(name);
  resolve_id(fields.pid, fields.has_pid, &event.pid, &event.pid_text, kPidIsText, &event.flags,
             strings);
  if (process_name) return;
  if (!fields.has_tid) event.flags |= kNoTid;
  resolve_id(fields.tid, fields.has_tid, &event.tid, &event.tid_text, kTidIsText, &event.flags,
             strings);
  std::string_view key_text;
  element thread_tid;
  if (!written_by_opsight || fields.args["opsight.async_key"].get(key_text) != simdjson::SUCCESS ||
      fields.args["opsight.tid"].get(thread_tid) != simdjson::SUCCESS)
    return;
  auto key = parse_hex64(key_text);
  if (!key || *key == 0) return;
  event.span_id = *key;
  int64_t number = 0;
  uint32_t text = 0;
  uint16_t flags = 0;
  resolve_id(thread_tid, true, &number, &text, 1, &flags, strings);
  out.args.push_back(
      {0, flags != 0 ? trace::ArgValue::of_string(text) : trace::ArgValue::of_int(number)});
}

// An async or flow id: a number as it is; a string of hex digits (with or without "0x", as
// Chrome writes them) as their value; any other non-empty string as a hash of its text.
std::optional<uint64_t> id_value(element value) {
  switch (value.type()) {
    case element_type::INT64:
      return static_cast<uint64_t>(value.get_int64().value_unsafe());
    case element_type::UINT64:
      return value.get_uint64().value_unsafe();
    case element_type::DOUBLE: {
      double number = value.get_double().value_unsafe();
      if (!(std::fabs(number) < 9.2e18)) return std::nullopt;
      return static_cast<uint64_t>(static_cast<int64_t>(number));
    }
    case element_type::STRING: {
      std::string_view text = value.get_string().value_unsafe();
      if (text.empty()) return std::nullopt;
      std::string_view digits = text;
      if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
        digits.remove_prefix(2);
      if (digits.size() <= 16)
        if (auto hex = parse_hex64(digits)) return *hex;
      return XXH3_64bits(text.data(), text.size());
    }
    default:
      return std::nullopt;
  }
}

// A counter's "id" as the text that names its tracks ("<name> id: <id>"): a string as it
// is, a number in decimal; anything else (or an empty string) is no id.
uint32_t counter_id_text(element value, LocalStrings& strings) {
  switch (value.type()) {
    case element_type::STRING:
      return strings.intern(value.get_string().value_unsafe());
    case element_type::INT64:
      return strings.intern(std::to_string(value.get_int64().value_unsafe()));
    case element_type::UINT64:
      return strings.intern(std::to_string(value.get_uint64().value_unsafe()));
    case element_type::DOUBLE:
      return strings.intern(simdjson::minify(value));
    default:
      return 0;
  }
}

// The id of an async event: "id" (global, as in Perfetto's importer), else "id2" with
// "global" or "local" (per process). Sets kGlobalId.
bool resolve_async_id(const EventFields& fields, DecodedEvent& event) {
  if (fields.has_id) {
    auto id = id_value(fields.id);
    if (!id) return false;
    event.span_id = *id;
    event.flags |= kGlobalId;
    return true;
  }
  if (!fields.has_id2 || fields.id2.type() != element_type::OBJECT) return false;
  element inner;
  if (fields.id2["global"].get(inner) == simdjson::SUCCESS) {
    event.flags |= kGlobalId;
  } else if (fields.id2["local"].get(inner) != simdjson::SUCCESS) {
    return false;
  }
  auto id = id_value(inner);
  if (!id) return false;
  event.span_id = *id;
  return true;
}

}  // namespace

const char* describe(EventProblem problem) {
  switch (problem) {
    case EventProblem::kNotAnObject:
      return "not a JSON object";
    case EventProblem::kNoPhase:
      return "no \"ph\" (phase) string";
    case EventProblem::kNoTs:
      return "no \"ts\"";
    case EventProblem::kBadTs:
      return "\"ts\" is not a number of microseconds in range";
    case EventProblem::kBadDur:
      return "\"dur\" is not a number of microseconds in range";
    case EventProblem::kNoDur:
      return "\"X\" (complete) event without \"dur\"";
    case EventProblem::kNoId:
      return "async or flow event without an \"id\" (or \"id2\")";
    case EventProblem::kNone:
      break;
  }
  return "malformed event";
}

LocalStrings::LocalStrings() : index_(kInitialSlots) { clear(); }

void LocalStrings::clear() {
  bytes_.clear();
  spans_.clear();
  spans_.emplace_back(0, 0);
  index_.clear();
}

uint32_t LocalStrings::intern(std::string_view text) {
  if (text.empty()) return 0;
  return index_.find_or_add(
      text, XXH3_64bits(text.data(), text.size()), [this](uint32_t id) { return get(id); },
      [&] {
        auto id = static_cast<uint32_t>(spans_.size());
        spans_.emplace_back(static_cast<uint32_t>(bytes_.size()),
                            static_cast<uint32_t>(text.size()));
        bytes_.append(text);
        return id;
      });
}

void EventDecoder::decode(element value, DecodedEvents& out) {
  DecodedEvent& event = out.events.emplace_back();
  decode_event(value, event, out);
  event.args_end = static_cast<uint32_t>(out.args.size());
}

void EventDecoder::decode_event(element value, DecodedEvent& event, DecodedEvents& out) {
  auto invalid = [&](EventProblem problem) {
    event.kind = EventKind::kInvalid;
    event.problem = problem;
  };
  if (value.type() != element_type::OBJECT) return invalid(EventProblem::kNotAnObject);
  EventFields fields;
  gather_fields(object_of(value), fields);
  if (!fields.has_phase || fields.phase.empty()) return invalid(EventProblem::kNoPhase);
  LocalStrings& strings = out.strings;
  switch (fields.phase[0]) {  // only the first character counts ("XXX" is X)
    case 'X':
      event.kind = EventKind::kSlice;
      break;
    case 'B':
      event.kind = EventKind::kBegin;
      break;
    case 'E':
      event.kind = EventKind::kEnd;
      break;
    case 'i':
    case 'I':
    case 'R':  // a mark (navigation timing): an instant, as in Perfetto's importer
      event.kind = EventKind::kInstant;
      if (fields.scope.size() == 1 && fields.scope[0] == 'p') event.flags |= kScopeProcess;
      if (fields.scope.size() == 1 && fields.scope[0] == 'g') event.flags |= kScopeGlobal;
      break;
    case 'C':
      event.kind = EventKind::kCounter;
      break;
    case 'b':
    case 'S':
      event.kind = EventKind::kAsyncBegin;
      break;
    case 'e':
    case 'F':
      event.kind = EventKind::kAsyncEnd;
      break;
    case 'n':
    case 'T':
    case 'p':
      event.kind = EventKind::kAsyncInstant;
      break;
    case 's':
      event.kind = EventKind::kFlowStart;
      break;
    case 't':
      event.kind = EventKind::kFlowStep;
      break;
    case 'f':
      event.kind = EventKind::kFlowEnd;
      if (fields.binding_point.size() == 1 && fields.binding_point[0] == 'e')
        event.flags |= kBindEnclosing;
      break;
    case 'M':
      decode_metadata(fields, written_by_opsight_, event, out);
      return;
    default:
      event.kind = EventKind::kSkipped;
      event.name = strings.intern(fields.phase);
      return;
  }
  if (!fields.has_ts) return invalid(EventProblem::kNoTs);
  if (!microseconds_to_ns(fields.ts, &event.ts) ||
      __builtin_add_overflow(event.ts, time_base_ns_, &event.ts))
    return invalid(EventProblem::kBadTs);
  if (event.kind == EventKind::kSlice) {
    if (!fields.has_dur) return invalid(EventProblem::kNoDur);
    if (!microseconds_to_ns(fields.dur, &event.dur)) return invalid(EventProblem::kBadDur);
    if (event.dur < 0) event.dur = 0;
    if (event.ts > std::numeric_limits<int64_t>::max() - event.dur)
      event.dur = std::numeric_limits<int64_t>::max() - event.ts;
  }
  const bool is_async = event.kind == EventKind::kAsyncBegin ||
                        event.kind == EventKind::kAsyncEnd ||
                        event.kind == EventKind::kAsyncInstant;
  const bool is_flow = event.kind == EventKind::kFlowStart || event.kind == EventKind::kFlowStep ||
                       event.kind == EventKind::kFlowEnd;
  if (is_async && !resolve_async_id(fields, event)) return invalid(EventProblem::kNoId);
  if (is_flow) {
    std::optional<uint64_t> id = fields.has_id ? id_value(fields.id) : std::nullopt;
    if (!id) return invalid(EventProblem::kNoId);
    event.span_id = *id;
  }
  resolve_id(fields.pid, fields.has_pid, &event.pid, &event.pid_text, kPidIsText, &event.flags,
             strings);
  event.name = strings.intern(fields.name);
  if (event.kind == EventKind::kCounter) {
    if (fields.has_id) event.category = counter_id_text(fields.id, strings);
    if (fields.has_args && fields.args.type() == element_type::OBJECT)
      decode_counter_args(fields.args, out);
    return;
  }
  if (!fields.has_tid) event.flags |= kNoTid;
  resolve_id(fields.tid, fields.has_tid, &event.tid, &event.tid_text, kTidIsText, &event.flags,
             strings);
  event.category = strings.intern(fields.category);
  if (event.kind == EventKind::kSlice &&
      (equals_literal(fields.category, "Session") || equals_literal(fields.category, "Node")))
    out.saw_onnxruntime_category = true;
  const bool opens_a_slice = event.kind == EventKind::kSlice || event.kind == EventKind::kBegin ||
                             event.kind == EventKind::kAsyncBegin ||
                             event.kind == EventKind::kAsyncInstant;
  out.slices += opens_a_slice;
  EventExtra extra;
  bool has_extra = false;
  if (opens_a_slice && fields.has_bind_id && (fields.flow_in || fields.flow_out)) {
    if (auto bind_id = id_value(fields.bind_id)) {
      extra.bind_id = *bind_id;
      extra.flow_in = fields.flow_in;
      extra.flow_out = fields.flow_out;
      has_extra = true;
    }
  }
  if (fields.has_args && fields.args.type() == element_type::OBJECT) {
    if (is_flow) {
      // Flow events have no table for their args; opsight's writer marks the slice each
      // end binds to.
      element marked;
      std::string_view hex;
      if (written_by_opsight_ && fields.args["opsight.slice"].get(marked) == simdjson::SUCCESS &&
          marked.get(hex) == simdjson::SUCCESS) {
        if (auto span = parse_hex64(hex)) {
          extra.marked_span = *span;
          has_extra = true;
        }
      }
    } else {
      size_t args_before = out.args.size();
      // An async slice's span id goes aside: span_id holds its async id.
      decode_args(fields.args, opens_a_slice && written_by_opsight_,
                  is_async ? &extra.marked_span : &event.span_id, event, out);
      has_extra |= extra.marked_span != 0;
      if (event.kind != EventKind::kInstant) out.slice_args += out.args.size() - args_before;
    }
  }
  if (has_extra) {
    out.extras.push_back(extra);
    event.flags |= kHasExtra;
  }
}

// Every member of an "args" object becomes an argument. In files opsight wrote, on the
// event that opens a slice, "opsight.span_id" is the slice's id, "opsight.unfinished" a
// flag, and "opsight.parent_span_id" is implied by the nesting.
void EventDecoder::decode_args(element args, bool own_markers, uint64_t* span_id,
                               DecodedEvent& event, DecodedEvents& out) {
  for (auto [key, value] : object_of(args)) {
    if (own_markers && key.size() > 8 && std::memcmp(key.data(), "opsight.", 8) == 0) {
      std::string_view marker = key.substr(8);
      if (equals_literal(marker, "unfinished") && value.type() == element_type::BOOL) {
        if (value.get_bool().value_unsafe()) event.flags |= kUnfinished;
        continue;
      }
      bool is_span_id = equals_literal(marker, "span_id");
      if ((is_span_id || equals_literal(marker, "parent_span_id")) &&
          value.type() == element_type::STRING) {
        if (auto id = parse_hex64(value.get_string().value_unsafe())) {
          if (is_span_id) *span_id = *id;
          continue;
        }
      }
    }
    out.args.push_back({out.strings.intern(key), to_arg_value(value, out.strings)});
  }
}

// A counter event's numeric args, each a sample ({"value": 5, "unit": "MB"} is one).
void EventDecoder::decode_counter_args(element args, DecodedEvents& out) {
  for (auto [key, value] : object_of(args)) {
    std::optional<double> sample = numeric_value(value);
    if (!sample) continue;
    out.args.push_back({out.strings.intern(key), trace::ArgValue::of_double(*sample)});
  }
}

trace::ArgValue EventDecoder::to_arg_value(element value, LocalStrings& strings) {
  using trace::ArgValue;
  switch (value.type()) {
    case element_type::INT64:
      return ArgValue::of_int(value.get_int64().value_unsafe());
    case element_type::UINT64: {
      uint64_t number = value.get_uint64().value_unsafe();
      if (number <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return ArgValue::of_int(static_cast<int64_t>(number));
      return ArgValue::of_double(static_cast<double>(number));
    }
    case element_type::DOUBLE:
      return ArgValue::of_double(value.get_double().value_unsafe());
    case element_type::BOOL:
      return ArgValue::of_bool(value.get_bool().value_unsafe());
    case element_type::STRING:
      return ArgValue::of_string(strings.intern(value.get_string().value_unsafe()));
    case element_type::NULL_VALUE:
      return ArgValue::of_string(strings.intern("null"));
    default:  // nested array or object: kept as compact JSON text
      compact_json_.clear();
      return ArgValue::of_string(append_compact_json(value, compact_json_)
                                     ? strings.intern(compact_json_.view())
                                     : strings.intern(simdjson::minify(value)));
  }
}

}  // namespace opsight::io::chrome_json
