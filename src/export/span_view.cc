#include "export/span_view.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "export/optional_whitespace.hpp"

namespace opsight::exporting {

namespace {

// The program's name from a command line: the first word's last path component, or the
// script's name when the program is an interpreter ("python serve.py" -> "serve.py"). The
// module `opsight run` starts a script through ("python -m opsight._capture.script
// serve.py") names the script it runs, not itself.
std::string program_name(std::string_view command_line) {
  std::vector<std::string_view> words;
  size_t position = 0;
  while (position < command_line.size()) {
    size_t start = command_line.find_first_not_of(' ', position);
    if (start == std::string_view::npos) break;
    size_t end = command_line.find(' ', start);
    if (end == std::string_view::npos) end = command_line.size();
    words.push_back(command_line.substr(start, end - start));
    position = end;
  }
  auto base = [](std::string_view word) {
    size_t slash = word.rfind('/');
    return slash == std::string_view::npos ? word : word.substr(slash + 1);
  };
  if (words.empty()) return "opsight";
  std::string_view program = base(words[0]);
  if (program.starts_with("python") && words.size() > 1) {
    for (size_t i = 1; i < words.size(); ++i) {
      if (words[i] == "-m" && i + 1 < words.size()) {
        if (words[i + 1] != "opsight._capture.script") return std::string(words[i + 1]);
        ++i;  // the script (or "-m MODULE") it runs follows
        continue;
      }
      if (!words[i].starts_with("-")) return std::string(base(words[i]));
    }
  }
  return std::string(program);
}

int hex_digit(char character) {
  if (character >= '0' && character <= '9') return character - '0';
  if (character >= 'a' && character <= 'f') return character - 'a' + 10;
  if (character >= 'A' && character <= 'F') return character - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view span_kind_name(SpanKind kind) {
  switch (kind) {
    case SpanKind::kInternal:
      return "INTERNAL";
    case SpanKind::kServer:
      return "SERVER";
    case SpanKind::kClient:
      return "CLIENT";
    case SpanKind::kProducer:
      return "PRODUCER";
    case SpanKind::kConsumer:
      return "CONSUMER";
    case SpanKind::kUnspecified:
      break;
  }
  return "UNSPECIFIED";
}

std::string AttributeValue::to_string() const {
  switch (type) {
    case Type::kString:
      return std::string(string_value);
    case Type::kBool:
      return int_value ? "true" : "false";
    case Type::kInt:
      return std::to_string(int_value);
    case Type::kDouble: {
      char text[32];
      std::snprintf(text, sizeof(text), "%.17g", double_value);
      return text;
    }
  }
  return {};
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int high = hex_digit(text[i + 1]);
      int low = hex_digit(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_key_value_list(
    std::string_view text, std::vector<std::string>* errors) {
  std::vector<std::pair<std::string, std::string>> entries;
  size_t position = 0;
  while (position <= text.size()) {
    size_t comma = text.find(',', position);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view entry = trim_optional_whitespace(text.substr(position, comma - position));
    position = comma + 1;
    if (entry.empty()) continue;
    size_t equals = entry.find('=');
    std::string_view key = equals == std::string_view::npos
                               ? entry
                               : trim_optional_whitespace(entry.substr(0, equals));
    if (equals == std::string_view::npos || key.empty()) {
      if (errors) errors->push_back("'" + std::string(entry) + "' is not key=value");
      continue;
    }
    entries.emplace_back(percent_decode(key),
                         percent_decode(trim_optional_whitespace(entry.substr(equals + 1))));
  }
  return entries;
}

SpanView::SpanView(const trace::Trace& trace, const ResourceOptions& options,
                   std::vector<SpanIdentity> identities)
    : SpanView(trace, options) {
  identities_ = std::move(identities);
  identities_.resize(trace.slices.size());
}

SpanView::SpanView(const trace::Trace& trace, const ResourceOptions& options)
    : trace_(trace), membership_(trace) {
  const trace::SliceTable& slices = trace.slices;
  unix_offset_ns_ = trace.run.has_unix_offset ? trace.run.unix_offset_ns : 0;

  // Processes in pid order of first appearance among tracks; rows grouped by process.
  std::vector<int64_t> pids;
  resource_of_track_.assign(trace.tracks.size(), 0);
  for (trace::TrackId track = 0; track < trace.tracks.size(); ++track) {
    int64_t pid = trace.tracks[track].pid;
    auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end()) it = pids.insert(pids.end(), pid);
    resource_of_track_[track] = static_cast<uint32_t>(it - pids.begin());
  }
  rows_.resize(slices.size());
  std::iota(rows_.begin(), rows_.end(), trace::RowIndex{0});
  std::stable_sort(rows_.begin(), rows_.end(), [&](trace::RowIndex a, trace::RowIndex b) {
    uint32_t resource_a = resource_of_track_[slices.track[a]];
    uint32_t resource_b = resource_of_track_[slices.track[b]];
    if (resource_a != resource_b) return resource_a < resource_b;
    return slices.ts[a] < slices.ts[b];
  });

  // One resource per process.
  std::string default_service =
      options.service_name.empty() ? program_name(trace.run.command_line) : options.service_name;
  resources_.resize(pids.size());
  for (const auto& [key, value] : options.attributes) {
    owned_strings_.push_back(key);
    owned_strings_.push_back(value);
  }
  owned_strings_.push_back(options.opsight_version.empty() ? "unknown" : options.opsight_version);
  std::string_view sdk_version = owned_strings_.back();
  for (size_t i = 0; i < pids.size(); ++i) {
    ProcessResource& resource = resources_[i];
    resource.pid = pids[i];
    resource.service_name = default_service;
    auto& attributes = resource.attributes;
    attributes.push_back(
        {"service.name", AttributeValue::of(std::string_view(resource.service_name))});
    if (!trace.run.host.empty())
      attributes.push_back({"host.name", AttributeValue::of(trace.run.host)});
    attributes.push_back({"process.pid", AttributeValue::of(resource.pid)});
    if (resource.pid == trace.run.pid && !trace.run.command_line.empty())
      attributes.push_back({"process.command_line", AttributeValue::of(trace.run.command_line)});
    for (const trace::Process& process : trace.processes) {
      if (process.pid != resource.pid) continue;
      if (process.parent_pid != 0)
        attributes.push_back({"process.parent_pid", AttributeValue::of(process.parent_pid)});
      if (process.name != 0)
        attributes.push_back({"process.title", AttributeValue::of(trace.str(process.name))});
    }
    attributes.push_back({"telemetry.sdk.name", AttributeValue::of(std::string_view("opsight"))});
    attributes.push_back({"telemetry.sdk.language", AttributeValue::of(std::string_view("cpp"))});
    attributes.push_back({"telemetry.sdk.version", AttributeValue::of(sdk_version)});
    for (size_t j = 0; j + 1 < options.attributes.size() * 2; j += 2) {
      std::string_view key = owned_strings_[j];
      if (key == "service.name") continue;  // the service name given wins (as the spec says)
      attributes.push_back({key, AttributeValue::of(std::string_view(owned_strings_[j + 1]))});
    }
  }

  // Thread names per track.
  thread_names_.resize(trace.tracks.size());
  for (trace::TrackId track = 0; track < trace.tracks.size(); ++track)
    thread_names_[track] = trace.track_label(track);

  // Links: flows arriving at each row, as a CSR index over rows.
  link_begin_.assign(slices.size() + 1, 0);
  for (size_t flow = 0; flow < trace.flows.size(); ++flow)
    if (trace.flows.slice_in[flow] < slices.size() && trace.flows.slice_out[flow] < slices.size())
      ++link_begin_[trace.flows.slice_in[flow] + 1];
  std::partial_sum(link_begin_.begin(), link_begin_.end(), link_begin_.begin());
  link_rows_.resize(link_begin_.back());
  std::vector<uint32_t> fill(link_begin_.begin(), link_begin_.end() - 1);
  for (size_t flow = 0; flow < trace.flows.size(); ++flow) {
    trace::RowIndex in = trace.flows.slice_in[flow];
    trace::RowIndex out = trace.flows.slice_out[flow];
    if (in < slices.size() && out < slices.size()) link_rows_[fill[in]++] = out;
  }

  if (auto id = trace.strings.find("span.kind")) {
    kind_key_ = *id;
    has_kind_key_ = true;
  }
  auto type = trace.strings.find("exception.type");
  if (type) {
    has_exception_keys_ = true;
    exception_type_key_ = *type;
    exception_message_key_ = trace.strings.find("exception.message").value_or(trace::StringId(-1));
    exception_stack_key_ = trace.strings.find("exception.stacktrace").value_or(trace::StringId(-1));
  }
  if (auto error_type = trace.strings.find("error.type")) {
    error_type_key_ = *error_type;
    has_error_type_key_ = true;
  }
  gen_ai_conventions_ = options.gen_ai_conventions;
  if (auto module = trace.strings.find("module")) {
    module_category_ = *module;
    has_module_category_ = true;
  }
  if (auto session = trace.strings.find("session")) {
    session_category_ = *session;
    has_session_category_ = true;
  }
}

bool SpanView::is_model_inference(trace::RowIndex row) const {
  trace::StringId category = trace_.slices.category[row];
  if (has_session_category_ && category == session_category_)
    return trace_.str(trace_.slices.name[row]).starts_with("onnxruntime.");
  if (!has_module_category_ || category != module_category_) return false;
  if (!identities_.empty()) return identities_[row].model_root;
  trace::RowIndex parent = trace_.slices.parent[row];
  return parent == trace::kNoRow || trace_.slices.category[parent] != module_category_;
}

SpanKind SpanView::kind(trace::RowIndex row) const {
  if (!has_kind_key_) return SpanKind::kInternal;
  const trace::ArgTable& args = trace_.slice_args;
  for (auto arg = trace_.slices.args_begin[row]; arg < trace_.slices.args_begin[row + 1]; ++arg) {
    if (args.key[arg] != kind_key_ || args.value[arg].type != trace::ArgType::kString) continue;
    std::string_view value = trace_.str(args.value[arg].string_value);
    if (value == "server") return SpanKind::kServer;
    if (value == "client") return SpanKind::kClient;
    if (value == "producer") return SpanKind::kProducer;
    if (value == "consumer") return SpanKind::kConsumer;
  }
  return SpanKind::kInternal;
}

namespace {
AttributeValue attribute_of(const trace::Trace& trace, const trace::ArgValue& value) {
  switch (value.type) {
    case trace::ArgType::kInt:
      return AttributeValue::of(value.int_value);
    case trace::ArgType::kBool:
      return AttributeValue::of_bool(value.int_value != 0);
    case trace::ArgType::kDouble:
      return AttributeValue::of(value.double_value);
    case trace::ArgType::kString:
      return AttributeValue::of(trace.str(value.string_value));
  }
  return AttributeValue::of(std::string_view());
}
}  // namespace

void SpanView::attributes(trace::RowIndex row, std::vector<Attribute>& out) const {
  out.clear();
  const trace::ArgTable& args = trace_.slice_args;
  for (auto arg = trace_.slices.args_begin[row]; arg < trace_.slices.args_begin[row + 1]; ++arg) {
    trace::StringId key = args.key[arg];
    if (has_kind_key_ && key == kind_key_) continue;
    if (has_exception_keys_ && (key == exception_type_key_ || key == exception_message_key_ ||
                                key == exception_stack_key_))
      continue;  // in the exception event
    out.push_back({trace_.str(key), attribute_of(trace_, args.value[arg])});
  }
  trace::TrackId track = trace_.slices.track[row];
  out.push_back({"thread.id", AttributeValue::of(trace_.tracks[track].tid)});
  out.push_back({"thread.name", AttributeValue::of(std::string_view(thread_names_[track]))});
  trace::StringId category = trace_.slices.category[row];
  if (category != 0) out.push_back({"opsight.category", AttributeValue::of(trace_.str(category))});
  if (trace_.slices.flags[row] & trace::kSliceUnfinished)
    out.push_back({"opsight.unfinished", AttributeValue::of_bool(true)});
  if (gen_ai_conventions_ && is_model_inference(row)) add_gen_ai_attributes(row, out);
}

void SpanView::add_gen_ai_attributes(trace::RowIndex row, std::vector<Attribute>& out) const {
  auto has = [&](std::string_view key) {
    return std::any_of(out.begin(), out.end(), [&](const Attribute& a) { return a.key == key; });
  };
  std::string_view name = trace_.str(trace_.slices.name[row]);
  bool session = trace_.slices.category[row] == session_category_;
  // "onnxruntime.run model.onnx" -> "model.onnx"; a module span's name is its class's.
  std::string_view model = name;
  if (session) model = name.substr(std::min(name.size(), name.find(' ') + 1));
  if (!has("gen_ai.operation.name"))
    out.push_back({"gen_ai.operation.name", AttributeValue::of(std::string_view("inference"))});
  if (!has("gen_ai.provider.name"))
    out.push_back({"gen_ai.provider.name",
                   AttributeValue::of(std::string_view(session ? "onnxruntime" : "pytorch"))});
  if (!has("gen_ai.request.model") && !model.empty())
    out.push_back({"gen_ai.request.model", AttributeValue::of(model)});
}

bool SpanView::has_exception(trace::RowIndex row) const {
  if (!has_exception_keys_) return false;
  const trace::ArgTable& args = trace_.slice_args;
  for (auto arg = trace_.slices.args_begin[row]; arg < trace_.slices.args_begin[row + 1]; ++arg)
    if (args.key[arg] == exception_type_key_) return true;
  return false;
}

bool SpanView::has_error(trace::RowIndex row) const {
  if (!has_exception_keys_ && !has_error_type_key_) return false;
  const trace::ArgTable& args = trace_.slice_args;
  for (auto arg = trace_.slices.args_begin[row]; arg < trace_.slices.args_begin[row + 1]; ++arg) {
    trace::StringId key = args.key[arg];
    if ((has_exception_keys_ && key == exception_type_key_) ||
        (has_error_type_key_ && key == error_type_key_))
      return true;
  }
  return false;
}

std::string SpanView::error_message(trace::RowIndex row) const {
  std::string type, message, error_type;
  bool exception = false;
  const trace::ArgTable& args = trace_.slice_args;
  for (auto arg = trace_.slices.args_begin[row]; arg < trace_.slices.args_begin[row + 1]; ++arg) {
    trace::StringId key = args.key[arg];
    if (has_exception_keys_ && key == exception_type_key_) {
      type = attribute_of(trace_, args.value[arg]).to_string();
      exception = true;
    } else if (has_exception_keys_ && key == exception_message_key_) {
      message = attribute_of(trace_, args.value[arg]).to_string();
    } else if (has_error_type_key_ && key == error_type_key_) {
      error_type = attribute_of(trace_, args.value[arg]).to_string();
    }
  }
  if (!exception) return error_type;
  return message.empty() ? type : type + ": " + message;
}

void SpanView::exception_attributes(trace::RowIndex row, std::vector<Attribute>& out) const {
  out.clear();
  if (!has_exception_keys_) return;
  const trace::ArgTable& args = trace_.slice_args;
  for (auto arg = trace_.slices.args_begin[row]; arg < trace_.slices.args_begin[row + 1]; ++arg) {
    trace::StringId key = args.key[arg];
    if (key == exception_type_key_ || key == exception_message_key_ || key == exception_stack_key_)
      out.push_back({trace_.str(key), attribute_of(trace_, args.value[arg])});
  }
}

}  // namespace opsight::exporting
