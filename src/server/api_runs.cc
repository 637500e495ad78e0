// The API's runs: /api/info, /api/runs (search, filter, sort), /api/runs/{run} (metadata,
// counts, the tracer's overhead and drops) and DELETE /api/runs/{run}.
#include <algorithm>
#include <ctime>
#include <filesystem>

#include "analyze/statistics.hpp"
#include "report/report.hpp"
#include "server/api_internal.hpp"
#include "server/ascii_text.hpp"
#include "store/run_json.hpp"

namespace opsight::server {
namespace {

// The run's record as `opsight runs --format json` gives it, with the reference the API
// takes and its kind.
nlohmann::json record_json(const store::RunRecord& record) {
  nlohmann::json object = store::run_record_json(record);
  object["ref"] = std::to_string(record.id);
  object["kind"] = "run";
  return object;
}

nlohmann::json file_json(size_t index, const std::string& path) {
  return {{"ref", "file:" + std::to_string(index)},
          {"kind", "file"},
          {"name", std::filesystem::path(path).filename().string()},
          {"path", path}};
}

// "2024-05-01" (UTC midnight) or a Unix time in seconds, as Unix ns.
int64_t parse_date_parameter(const std::string& name, const std::string& text) {
  int year = 0, month = 0, day = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c", &year, &month, &day, &tail) == 3 && month >= 1 &&
      month <= 12 && day >= 1 && day <= 31 && year >= 1970 && year <= 2200) {
    std::tm time{};
    time.tm_year = year - 1900;
    time.tm_mon = month - 1;
    time.tm_mday = day;
    return static_cast<int64_t>(timegm(&time)) * 1'000'000'000;
  }
  bool digits = !text.empty() &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits && text.size() <= 11) return std::stoll(text) * 1'000'000'000;
  throw ApiError(400, "query parameter '" + name + "': '" + text +
                          "' is neither a date (YYYY-MM-DD) nor Unix seconds");
}

bool record_matches_text(const store::RunRecord& record, const std::string& needle) {
  auto has = [&](const std::string& field) {
    return ascii_lowercase(field).find(needle) != std::string::npos;
  };
  if (has(record.metadata.name) || has(record.metadata.command) || has(std::to_string(record.id)) ||
      has(record.metadata.host))
    return true;
  for (const auto& [key, value] : record.metadata.tags)
    if (has(key) || has(key + "=" + value)) return true;
  return false;
}

}  // namespace

ApiResponse handle_info(ApiContext& context, const PathParams&, const QueryParams&) {
  nlohmann::json files = nlohmann::json::array();
  for (size_t i = 0; i < context.options().files.size(); ++i)
    files.push_back(file_json(i, context.options().files[i]));
  bool has_store = context.store() != nullptr;
  return json_response({{"version", OPSIGHT_VERSION_STRING},
                        {"store_path", context.store_path()},
                        {"store_problem", has_store ? "" : context.store_problem()},
                        {"files", files},
                        {"max_loaded_runs", context.cache().capacity()},
                        {"loaded_runs", context.cache().keys()},
                        {"token_required", context.options().token_required},
                        {"report_views", report::report_view_names()}});
}

ApiResponse handle_runs(ApiContext& context, const PathParams&, const QueryParams& query) {
  store::RunFilter filter;
  filter.name_glob = query.string_or("name", "");
  filter.tag = query.string_or("tag", "");
  if (auto since = query.optional_string("since"))
    filter.since_unix_ns = parse_date_parameter("since", *since);
  if (auto until = query.optional_string("until"))
    filter.until_unix_ns = parse_date_parameter("until", *until);
  const std::string sort = query.string_or("sort", "created");
  static const std::vector<std::string> kSortKeys = {"created", "id", "name", "duration", "slices"};
  if (std::find(kSortKeys.begin(), kSortKeys.end(), sort) == kSortKeys.end())
    throw ApiError(400, "query parameter 'sort': '" + sort +
                            "' is not one of created, id, name, duration, slices");
  const std::string order = query.string_or("order", sort == "name" ? "asc" : "desc");
  if (order != "asc" && order != "desc")
    throw ApiError(400, "query parameter 'order': '" + order + "' is not asc or desc");
  const auto limit = static_cast<size_t>(query.int_or("limit", 0, 0, 1'000'000));
  const std::string needle = ascii_lowercase(query.string_or("q", ""));

  nlohmann::json runs = nlohmann::json::array();
  std::vector<store::RunRecord> records;
  store::RunStore* store = context.store();
  if (store != nullptr) {
    auto listed = store->list(filter);
    if (!listed.ok()) throw ApiError(500, listed.error());
    records = std::move(listed.value());
  }
  if (!needle.empty())
    std::erase_if(records,
                  [&](const auto& record) { return !record_matches_text(record, needle); });
  auto key_less = [&](const store::RunRecord& a, const store::RunRecord& b) {
    if (sort == "name") return a.metadata.name < b.metadata.name;
    if (sort == "duration") return a.duration_ns < b.duration_ns;
    if (sort == "slices") return a.slice_count < b.slice_count;
    if (sort == "created" && a.created_unix_ns != b.created_unix_ns)
      return a.created_unix_ns < b.created_unix_ns;
    return a.id < b.id;
  };
  std::stable_sort(records.begin(), records.end(), [&](const auto& a, const auto& b) {
    return order == "asc" ? key_less(a, b) : key_less(b, a);
  });
  if (limit > 0 && records.size() > limit) records.resize(limit);
  for (const auto& record : records) runs.push_back(record_json(record));
  nlohmann::json files = nlohmann::json::array();
  for (size_t i = 0; i < context.options().files.size(); ++i)
    files.push_back(file_json(i, context.options().files[i]));
  return json_response({{"runs", runs},
                        {"files", files},
                        {"store_path", context.store_path()},
                        {"store_problem", store != nullptr ? "" : context.store_problem()}});
}

ApiResponse handle_run(ApiContext& context, const PathParams& path, const QueryParams&) {
  const std::string& reference = path.at(0);
  nlohmann::json body;
  if (auto record = context.resolve_record(reference)) {
    body = record_json(*record);
  } else {
    size_t index = *context.file_index(reference);
    body = file_json(index, context.options().files[index]);
  }
  auto run = context.load_run(reference);
  const trace::Trace& trace = run->trace();
  analyze::OverheadSummary overhead = analyze::summarize_overhead(trace);
  auto [first_ns, last_ns] = trace.time_bounds();
  body["label"] = run->label();
  body["damage"] = run->damage();
  body["start_ns"] = first_ns;
  body["end_ns"] = last_ns;
  body["counts"] = {{"slices", trace.slices.size()},
                    {"instants", trace.instants.size()},
                    {"counter_samples", trace.counters.size()},
                    {"flows", trace.flows.size()},
                    {"tracks", trace.tracks.size()},
                    {"counter_tracks", trace.counter_tracks.size()},
                    {"processes", trace.processes.size()}};
  body["overhead"] = {{"overhead_ns", overhead.overhead_ns},
                      {"overhead_known", overhead.overhead_known},
                      {"traced_ns", overhead.traced_ns},
                      {"share", overhead.share},
                      {"events_dropped", overhead.events_dropped},
                      {"line", report::format_overhead_line(overhead)}};
  body["recording"] = {{"command_line", trace.run.command_line},
                       {"host", trace.run.host},
                       {"opsight_version", trace.run.opsight_version},
                       {"source_format", trace.run.source_format},
                       {"clock", trace.run.clock},
                       {"pid", trace.run.pid},
                       {"start_unix_ns", trace.run.start_unix_ns},
                       {"complete", trace.run.complete}};
  return json_response(body);
}

ApiResponse handle_delete_run(ApiContext& context, const PathParams& path, const QueryParams&) {
  const std::string& reference = path.at(0);
  if (context.file_index(reference))
    throw ApiError(400, reference + " is a trace file given on the command line, not a stored run");
  store::RunRecord record = *context.resolve_record(reference);
  auto removed = context.store()->remove(record.id);
  if (!removed.ok()) throw ApiError(409, removed.error());
  context.cache().forget("run:" + std::to_string(record.id));
  return json_response({{"removed", record_json(removed.value())}});
}

namespace {

// The stored run a tag route names; trace files given on the command line have no tags.
store::RunRecord taggable_run(ApiContext& context, const std::string& reference) {
  if (context.file_index(reference))
    throw ApiError(400, reference +
                            " is a trace file given on the command line: only stored "
                            "runs have tags");
  return *context.resolve_record(reference);
}

void check_tag_text(const std::string& what, const std::string& text, size_t longest) {
  if (text.size() > longest)
    throw ApiError(400, "tag " + what + " is longer than " + std::to_string(longest) + " bytes");
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw ApiError(400, "tag " + what + " '" + text + "' holds a control character");
}

}  // namespace

ApiResponse handle_put_tag(ApiContext& context, const PathParams& path, const QueryParams& query) {
  store::RunRecord record = taggable_run(context, path.at(0));
  const std::string& key = path.at(1);
  const std::string value = query.string_or("value", "");
  check_tag_text("key", key, 200);
  check_tag_text("value", value, 1000);
  if (key.find('=') != std::string::npos)
    throw ApiError(400, "tag key '" + key + "' holds '=': give the value as ?value=");
  auto tagged = context.store()->set_tag(record.id, key, value);
  if (!tagged.ok()) throw ApiError(409, tagged.error());
  return json_response(record_json(tagged.value()));
}

ApiResponse handle_delete_tag(ApiContext& context, const PathParams& path, const QueryParams&) {
  store::RunRecord record = taggable_run(context, path.at(0));
  const std::string& key = path.at(1);
  const auto& tags = record.metadata.tags;
  if (std::none_of(tags.begin(), tags.end(), [&](const auto& tag) { return tag.first == key; }))
    throw ApiError(404, "run " + std::to_string(record.id) + " has no tag '" + key + "'");
  auto untagged = context.store()->remove_tag(record.id, key);
  if (!untagged.ok()) throw ApiError(409, untagged.error());
  return json_response(record_json(untagged.value()));
}

// The runs `opsight explain` saved (tag kind=explain), oldest first, each with its models'
// results as the model spans' "explain.result" attribute holds them (docs/explain.md).
ApiResponse handle_explain_runs(ApiContext& context, const PathParams&, const QueryParams& query) {
  const auto limit = static_cast<size_t>(query.int_or("limit", 100, 1, 10'000));
  nlohmann::json runs = nlohmann::json::array();
  store::RunStore* store = context.store();
  if (store == nullptr)
    return json_response({{"runs", runs}, {"store_problem", context.store_problem()}});
  store::RunFilter filter;
  filter.tag = "kind=explain";
  filter.limit = limit;
  auto listed = store->list(filter);
  if (!listed.ok()) throw ApiError(500, listed.error());
  std::vector<store::RunRecord> records = std::move(listed.value());
  std::reverse(records.begin(), records.end());  // oldest first: a history
  for (const store::RunRecord& record : records) {
    nlohmann::json entry = record_json(record);
    nlohmann::json models = nlohmann::json::array();
    io::ReadResult read = store->load_trace(record.id);
    if (!read.ok()) {
      entry["problem"] = read.error->message;
    } else {
      const trace::Trace& trace = read.trace;
      std::optional<trace::StringId> key = trace.strings.find("explain.result");
      for (trace::RowIndex row = 0; key && row < trace.slices.size(); ++row) {
        if (row + 1 >= trace.slices.args_begin.size()) break;
        for (auto arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1];
             ++arg) {
          if (trace.slice_args.key[arg] != *key ||
              trace.slice_args.value[arg].type != trace::ArgType::kString)
            continue;
          auto result = nlohmann::json::parse(trace.str(trace.slice_args.value[arg].string_value),
                                              nullptr, false);
          if (!result.is_object()) continue;
          // The result goes through as opsight explain stored it: its fields are defined
          // once, by opsight.explain.result.ModelExplain, and described by
          // docs/ui-openapi.json's ExplainModel (a test keeps the two equal).
          nlohmann::json model = std::move(result);
          model["span"] = trace.str(trace.slices.name[row]);
          if (!model.contains("breaks") || !model["breaks"].is_array())
            model["breaks"] = nlohmann::json::array();
          models.push_back(std::move(model));
        }
      }
    }
    entry["models"] = std::move(models);
    runs.push_back(std::move(entry));
  }
  return json_response({{"runs", runs}, {"store_problem", ""}});
}

}  // namespace opsight::server
