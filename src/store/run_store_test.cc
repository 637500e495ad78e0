// Tests of the run store: runs saved and found again by every kind of reference, filters,
// retention, the migration of a version-1 store made by hand, real processes saving at
// once, and damage (a file that is not a store, a truncated store, one damaged trace blob
// among whole ones) reported as errors naming the file or run, never a crash.
#include "store/run_store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "store/save_run.hpp"
#include "store/trace_source.hpp"

namespace {

using opsight::store::collect_host_metadata;
using opsight::store::git_commit_of;
using opsight::store::OpenOptions;
using opsight::store::RetentionPolicy;
using opsight::store::RunFilter;
using opsight::store::RunMetadata;
using opsight::store::RunRecord;
using opsight::store::RunStore;
using opsight::trace::Trace;

// A trace with `slices` slices named "step" under one "main", on one thread, with
// distinct durations (so the compressed bytes of two traces differ).
Trace make_trace(size_t slices, int64_t seed = 1) {
  Trace trace;
  trace.run.command_line = "python serve.py";
  trace.run.source_format = "opsight";
  trace.run.start_unix_ns = 1'700'000'000'000'000'000;
  auto track = trace.thread_track(7, 7);
  trace.slices.add(0, static_cast<int64_t>(slices) * 1000 + 1000, trace.intern("main"), 0, track);
  for (size_t i = 0; i < slices; ++i) {
    int64_t start = static_cast<int64_t>(i) * 1000 + 10;
    int64_t duration =
        100 +
        (static_cast<int64_t>(opsight::trace::mix64(i * 31 + static_cast<uint64_t>(seed))) & 511);
    trace.slices.add(start, duration, trace.intern("step"), 0, track);
  }
  trace.finalize();
  return trace;
}

RunMetadata metadata_named(std::string name,
                           std::vector<std::pair<std::string, std::string>> tags = {}) {
  RunMetadata metadata;
  metadata.name = std::move(name);
  metadata.command = "python serve.py --batch 8";
  metadata.working_directory = "/srv/app";
  metadata.tags = std::move(tags);
  metadata.versions = {{"torch", "2.3.0"}, {"opsight", "0.1.0"}};
  metadata.extra = {{"os", "Linux"}};
  return metadata;
}

class RunStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = std::filesystem::temp_directory_path() /
                 ("opsight_store_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
    path_ = (directory_ / "runs.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::unique_ptr<RunStore> open_store(const OpenOptions& options = {}) {
    auto opened = RunStore::open(path_, options);
    EXPECT_TRUE(opened.ok()) << opened.error();
    if (!opened.ok()) return nullptr;
    return std::move(opened.value());
  }

  RunRecord add(RunStore& store, const Trace& trace, const RunMetadata& metadata) {
    auto added = store.add(trace, metadata);
    EXPECT_TRUE(added.ok()) << added.error();
    return added.ok() ? added.value() : RunRecord{};
  }

  std::filesystem::path directory_;
  std::string path_;
};

std::vector<int64_t> ids_of(const std::vector<RunRecord>& records) {
  std::vector<int64_t> ids;
  for (const auto& record : records) ids.push_back(record.id);
  return ids;
}

TEST_F(RunStoreTest, SavesARunWithItsMetadataAndGivesItsTraceBack) {
  auto store = open_store();
  ASSERT_TRUE(store);
  Trace trace = make_trace(50);
  RunRecord saved = add(*store, trace, metadata_named("nightly", {{"model", "resnet"}}));
  EXPECT_EQ(saved.id, 1);
  EXPECT_EQ(saved.uuid.size(), 36u);
  EXPECT_EQ(saved.uuid[14], '4');  // version 4
  EXPECT_EQ(saved.slice_count, 51u);
  EXPECT_EQ(saved.duration_ns, 51'000);
  EXPECT_EQ(saved.source_format, "opsight");
  EXPECT_EQ(saved.trace_start_unix_ns, 1'700'000'000'000'000'000);
  EXPECT_GT(saved.trace_bytes, saved.stored_bytes);  // compressed
  EXPECT_GT(saved.stored_bytes, 0u);

  auto listed = store->list();
  ASSERT_TRUE(listed.ok()) << listed.error();
  ASSERT_EQ(listed.value().size(), 1u);
  const RunRecord& record = listed.value()[0];
  EXPECT_EQ(record.uuid, saved.uuid);
  EXPECT_EQ(record.created_unix_ns, saved.created_unix_ns);
  EXPECT_EQ(record.metadata.name, "nightly");
  EXPECT_EQ(record.metadata.command, "python serve.py --batch 8");
  EXPECT_EQ(record.metadata.working_directory, "/srv/app");
  EXPECT_EQ(record.metadata.tags, (opsight::store::KeyValues{{"model", "resnet"}}));
  EXPECT_EQ(record.metadata.versions,
            (opsight::store::KeyValues{{"opsight", "0.1.0"}, {"torch", "2.3.0"}}));
  EXPECT_EQ(record.metadata.extra, (opsight::store::KeyValues{{"os", "Linux"}}));
  EXPECT_EQ(record.stored_bytes, saved.stored_bytes);

  auto loaded = store->load_trace(saved.id);
  ASSERT_TRUE(loaded.ok()) << loaded.error->message;
  EXPECT_FALSE(loaded.damage.has_value());
  ASSERT_EQ(loaded.trace.slices.size(), trace.slices.size());
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    EXPECT_EQ(loaded.trace.slices.ts[row], trace.slices.ts[row]);
    EXPECT_EQ(loaded.trace.slices.dur[row], trace.slices.dur[row]);
    EXPECT_EQ(loaded.trace.str(loaded.trace.slices.name[row]), trace.str(trace.slices.name[row]));
  }
  EXPECT_EQ(loaded.trace.run.command_line, "python serve.py");
}

TEST_F(RunStoreTest, ReopenedStoreKeepsItsRunsAndIdsKeepGrowing) {
  {
    auto store = open_store();
    ASSERT_TRUE(store);
    add(*store, make_trace(3), metadata_named("a"));
    add(*store, make_trace(3), metadata_named("b"));
    ASSERT_TRUE(store->remove(2).ok());
  }
  auto store = open_store();
  ASSERT_TRUE(store);
  RunRecord third = add(*store, make_trace(3), metadata_named("c"));
  EXPECT_EQ(third.id, 3);  // an id is never reused, so "run 2" never names another run
  EXPECT_EQ(ids_of(store->list().value()), (std::vector<int64_t>{3, 1}));
}

TEST_F(RunStoreTest, ListFiltersByNameTagDateAndLimit) {
  auto store = open_store();
  ASSERT_TRUE(store);
  RunRecord first = add(*store, make_trace(2), metadata_named("resnet-a", {{"gpu", "h100"}}));
  RunRecord second = add(*store, make_trace(2), metadata_named("resnet-b", {{"gpu", "a100"}}));
  RunRecord third = add(*store, make_trace(2), metadata_named("bert", {{"ci", ""}}));

  auto ids = [&](const RunFilter& filter) {
    auto listed = store->list(filter);
    EXPECT_TRUE(listed.ok()) << listed.error();
    return ids_of(listed.value());
  };
  EXPECT_EQ(ids({}), (std::vector<int64_t>{3, 2, 1}));  // newest first
  EXPECT_EQ(ids({.name_glob = "resnet*"}), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ids({.name_glob = "Resnet*"}), (std::vector<int64_t>{}));  // case-sensitive
  EXPECT_EQ(ids({.tag = "gpu"}), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ids({.tag = "gpu=h100"}), (std::vector<int64_t>{1}));
  EXPECT_EQ(ids({.tag = "ci"}), (std::vector<int64_t>{3}));
  EXPECT_EQ(ids({.tag = "ci="}), (std::vector<int64_t>{3}));
  EXPECT_EQ(ids({.name_glob = "resnet*", .tag = "gpu=a100"}), (std::vector<int64_t>{2}));
  EXPECT_EQ(ids({.since_unix_ns = second.created_unix_ns}), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ids({.until_unix_ns = second.created_unix_ns}), (std::vector<int64_t>{1}));
  EXPECT_EQ(ids({.since_unix_ns = third.created_unix_ns + 1}), (std::vector<int64_t>{}));
  EXPECT_EQ(ids({.limit = 2}), (std::vector<int64_t>{3, 2}));
  EXPECT_LE(first.created_unix_ns, second.created_unix_ns);
}

TEST_F(RunStoreTest, TagsAreSetReplacedAndRemovedOnAStoredRun) {
  auto store = open_store();
  ASSERT_TRUE(store);
  RunRecord run = add(*store, make_trace(2), metadata_named("bert", {{"gpu", "h100"}}));
  auto tagged = store->set_tag(run.id, "reviewed", "yes");
  ASSERT_TRUE(tagged.ok()) << tagged.error();
  EXPECT_EQ(tagged.value().metadata.tags,
            (opsight::store::KeyValues{{"gpu", "h100"}, {"reviewed", "yes"}}));
  ASSERT_TRUE(store->set_tag(run.id, "gpu", "a100").ok());  // replaces the value
  auto listed = store->list({.tag = "gpu=a100"});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(ids_of(listed.value()), (std::vector<int64_t>{run.id}));
  auto untagged = store->remove_tag(run.id, "gpu");
  ASSERT_TRUE(untagged.ok()) << untagged.error();
  EXPECT_EQ(untagged.value().metadata.tags, (opsight::store::KeyValues{{"reviewed", "yes"}}));
  auto missing_tag = store->remove_tag(run.id, "gpu");
  ASSERT_FALSE(missing_tag.ok());
  EXPECT_NE(missing_tag.error().find("no tag 'gpu'"), std::string::npos) << missing_tag.error();
  EXPECT_FALSE(store->set_tag(run.id, "", "x").ok());
  auto missing_run = store->set_tag(run.id + 7, "a", "b");
  ASSERT_FALSE(missing_run.ok());
  EXPECT_NE(missing_run.error().find("no run"), std::string::npos) << missing_run.error();
}

TEST_F(RunStoreTest, ResolvesIdsLatestUuidPrefixesAndNames) {
  auto store = open_store();
  ASSERT_TRUE(store);
  RunRecord first = add(*store, make_trace(2), metadata_named("baseline"));
  RunRecord second = add(*store, make_trace(2), metadata_named("candidate"));
  RunRecord third = add(*store, make_trace(2), metadata_named("candidate"));

  auto resolved_id = [&](std::string_view reference) -> int64_t {
    auto run = store->resolve(reference);
    EXPECT_TRUE(run.ok()) << reference << ": " << run.error();
    return run.ok() ? run.value().id : -1;
  };
  EXPECT_EQ(resolved_id("1"), first.id);
  EXPECT_EQ(resolved_id("latest"), third.id);
  EXPECT_EQ(resolved_id("latest~0"), third.id);
  EXPECT_EQ(resolved_id("latest~2"), first.id);
  EXPECT_EQ(resolved_id(second.uuid), second.id);
  EXPECT_EQ(resolved_id(second.uuid.substr(0, 13)), second.id);
  std::string upper = second.uuid.substr(0, 13);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(resolved_id(upper), second.id);
  EXPECT_EQ(resolved_id("baseline"), first.id);
  EXPECT_EQ(resolved_id("candidate"), third.id);  // the newest of that name

  // (11 digits never begin a uuid: its ninth character is a dash.)
  for (std::string_view missing : {"12345678901", "latest~3", "nosuchrun"}) {
    auto run = store->resolve(missing);
    ASSERT_FALSE(run.ok()) << missing;
    EXPECT_NE(run.error().find("no run"), std::string::npos) << run.error();
    EXPECT_NE(run.error().find(path_), std::string::npos) << run.error();
  }
  // A name wins over a uuid prefix: a run named with the first characters of another's uuid
  // is found by its name; fewer than 4 characters are never taken as a uuid prefix.
  RunRecord named_like_uuid = add(*store, make_trace(2), metadata_named(first.uuid.substr(0, 4)));
  EXPECT_EQ(resolved_id(first.uuid.substr(0, 4)), named_like_uuid.id);
  EXPECT_EQ(resolved_id(first.uuid.substr(0, 8)), first.id);
  auto short_prefix = store->resolve(second.uuid.substr(0, 3));
  EXPECT_FALSE(short_prefix.ok() && short_prefix.value().id == second.id);

  auto bad = store->resolve("latest~x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("latest~N"), std::string::npos) << bad.error();
  EXPECT_FALSE(store->resolve("").ok());
}

void execute(sqlite3* database, const std::string& sql);  // below

TEST_F(RunStoreTest, AnAmbiguousUuidPrefixListsItsCandidates) {
  auto store = open_store();
  ASSERT_TRUE(store);
  RunRecord first = add(*store, make_trace(1), metadata_named("r"));
  RunRecord second = add(*store, make_trace(1), metadata_named("r"));
  add(*store, make_trace(1), metadata_named("r"));
  store.reset();
  {  // Two uuids made to share their first 8 characters.
    sqlite3* database = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
    execute(database, "UPDATE runs SET uuid = 'abcdef01' || substr(uuid, 9) WHERE id IN (" +
                          std::to_string(first.id) + ", " + std::to_string(second.id) + ");");
    sqlite3_close(database);
  }
  store = open_store();
  ASSERT_TRUE(store);
  auto run = store->resolve("abcdef");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().find("ambiguous"), std::string::npos) << run.error();
  EXPECT_NE(run.error().find("run " + std::to_string(first.id) + " ("), std::string::npos)
      << run.error();
  EXPECT_NE(run.error().find("run " + std::to_string(second.id) + " ("), std::string::npos)
      << run.error();
}

TEST_F(RunStoreTest, RemoveDeletesTheRunAndItsTrace) {
  auto store = open_store();
  ASSERT_TRUE(store);
  add(*store, make_trace(2), metadata_named("keep", {{"k", "v"}}));
  RunRecord doomed = add(*store, make_trace(2), metadata_named("doomed", {{"k", "v"}}));
  auto removed = store->remove(doomed.id);
  ASSERT_TRUE(removed.ok()) << removed.error();
  EXPECT_EQ(removed.value().uuid, doomed.uuid);
  EXPECT_EQ(ids_of(store->list({.tag = "k=v"}).value()), (std::vector<int64_t>{1}));
  EXPECT_FALSE(store->resolve(doomed.uuid).ok());
  auto loaded = store->load_trace(doomed.id);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error->message, "no run 2 in " + path_);
  auto again = store->remove(doomed.id);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error(), "no run 2 in " + path_);
}

TEST_F(RunStoreTest, RetentionKeepsTheNewestRunsAndDropsOldOnes) {
  auto store = open_store();
  ASSERT_TRUE(store);
  std::vector<RunRecord> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(add(*store, make_trace(1), metadata_named("r")));
  auto kept = store->apply_retention({.keep_last = 3});
  ASSERT_TRUE(kept.ok()) << kept.error();
  EXPECT_EQ(kept.value(), 2u);
  EXPECT_EQ(ids_of(store->list().value()), (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(store->apply_retention({.keep_last = 3}).value(), 0u);

  // Runs 3 and 4 are older than one hour at a "now" set one hour after run 4 was saved.
  int64_t hour = 3'600'000'000'000;
  auto aged = store->apply_retention(
      {.max_age_ns = hour, .now_unix_ns = runs[3].created_unix_ns + hour + 1});
  ASSERT_TRUE(aged.ok()) << aged.error();
  EXPECT_EQ(aged.value(), runs[4].created_unix_ns > runs[3].created_unix_ns + 1 ? 2u : 3u);
  EXPECT_EQ(ids_of(store->list().value()).size(), 3u - aged.value());
  EXPECT_EQ(store->apply_retention({.keep_last = 0}).value(), 3u - aged.value());
  EXPECT_TRUE(store->list().value().empty());
}

// A large trace is kept as a compressed file beside the database (here every trace:
// threshold 0): saved and loaded like a blob, removed with its run by remove and by
// retention, and a file gone missing is an error naming the run and the file.
TEST_F(RunStoreTest, LargeTracesAreFilesBesideTheDatabaseRemovedWithTheirRuns) {
  OpenOptions options;
  options.file_threshold_bytes = 0;
  auto store = open_store(options);
  ASSERT_TRUE(store);
  Trace trace = make_trace(5000, 3);
  RunRecord first = add(*store, trace, metadata_named("big"));
  const std::filesystem::path file =
      std::filesystem::path(store->traces_folder()) / (first.uuid + ".opsight.zst");
  ASSERT_TRUE(std::filesystem::is_regular_file(file));
  EXPECT_EQ(first.stored_bytes, std::filesystem::file_size(file));
  EXPECT_EQ(first.trace_bytes, opsight::io::write_native(trace).size());
  EXPECT_LT(first.stored_bytes, first.trace_bytes);  // compressed
  struct stat folder {};
  ASSERT_EQ(::stat(store->traces_folder().c_str(), &folder), 0);
  EXPECT_EQ(folder.st_mode & 0777, 0700u);

  auto loaded = store->load_trace(first.id);
  ASSERT_TRUE(loaded.ok()) << loaded.error->message;
  ASSERT_EQ(loaded.trace.slices.size(), trace.slices.size());
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    EXPECT_EQ(loaded.trace.slices.dur[row], trace.slices.dur[row]);
    EXPECT_EQ(loaded.trace.str(loaded.trace.slices.name[row]), trace.str(trace.slices.name[row]));
  }

  // A small trace under the default threshold stays a blob in the same store.
  auto default_store = open_store();
  RunRecord small = add(*default_store, make_trace(3), metadata_named("small"));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(store->traces_folder()) /
                                       (small.uuid + ".opsight.zst")));
  EXPECT_TRUE(default_store->load_trace(small.id).ok());

  RunRecord second = add(*store, make_trace(100, 4), metadata_named("big"));
  const auto second_file =
      std::filesystem::path(store->traces_folder()) / (second.uuid + ".opsight.zst");
  ASSERT_TRUE(store->remove(first.id).ok());
  EXPECT_FALSE(std::filesystem::exists(file));
  ASSERT_TRUE(std::filesystem::exists(second_file));
  ASSERT_EQ(store->apply_retention({.keep_last = 1}).value(), 1u);  // the small run goes
  EXPECT_TRUE(std::filesystem::exists(second_file));

  // A file cut short is damage named with its run; no decompressed copy is left behind.
  std::filesystem::resize_file(second_file, std::filesystem::file_size(second_file) / 2);
  auto cut = store->load_trace(second.id);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error->message.find(second_file.string()), std::string::npos) << cut.error->message;
  EXPECT_NE(cut.error->message.find("cut short"), std::string::npos) << cut.error->message;
  for (const auto& entry : std::filesystem::directory_iterator(store->traces_folder()))
    EXPECT_EQ(entry.path(), second_file) << "left in the traces folder";

  std::filesystem::remove(second_file);
  auto missing = store->load_trace(second.id);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error->message.find("run " + std::to_string(second.id) + " in " + path_),
            std::string::npos)
      << missing.error->message;
  EXPECT_NE(missing.error->message.find(second_file.string()), std::string::npos)
      << missing.error->message;
  ASSERT_TRUE(store->apply_retention({.keep_last = 0}).ok());  // a file already gone is fine
  EXPECT_TRUE(store->list().value().empty());
}

// A native file saved as it is (save_native_file: one streaming pass for the runs table's
// facts, then the file copied in compressed) gives the run save_trace_files gives when it
// reads the file whole: the same slice count, duration, start, format, command and host,
// and the same trace loaded back, as a file beside the database and as a blob.
TEST_F(RunStoreTest, ANativeFileSavedAsItIsGivesTheRunReadingItWholeGives) {
  Trace trace = make_trace(3000, 5);
  auto worker = trace.thread_track(7, 9);
  trace.slices.add(500, 40'000, trace.intern("worker"), 0, worker);
  trace.instants.add(3'100'000, trace.intern("late marker"), 0, worker);
  trace.counters.add(3'200'000, trace.counter_track(7, "rss", "bytes"), 1e6);
  trace.run.host = "box-7";
  trace.finalize();
  const std::string file = (directory_ / "merged.opsight").string();
  ASSERT_FALSE(opsight::io::write_file_bytes(file, opsight::io::write_native(trace)));

  opsight::store::SaveRequest request;
  request.store_path = path_;
  request.files = {file};
  request.working_directory = directory_.string();
  auto whole = opsight::store::save_trace_files(request);  // small: read whole
  ASSERT_TRUE(whole.ok()) << *whole.error;
  auto streamed = opsight::store::save_native_file(request);
  ASSERT_TRUE(streamed.ok()) << *streamed.error;
  EXPECT_TRUE(streamed.damage.empty());
  const RunRecord& a = *whole.run;
  const RunRecord& b = *streamed.run;
  EXPECT_EQ(b.slice_count, a.slice_count);
  EXPECT_EQ(b.slice_count, trace.slices.size());
  EXPECT_EQ(b.duration_ns, a.duration_ns);
  EXPECT_EQ(b.duration_ns, 3'200'000);  // from the first span's start to the counter sample
  EXPECT_EQ(b.trace_start_unix_ns, a.trace_start_unix_ns);
  EXPECT_EQ(b.source_format, a.source_format);
  EXPECT_EQ(b.metadata.command, "python serve.py");
  EXPECT_EQ(b.metadata.host, "box-7");
  EXPECT_EQ(b.metadata.name, "merged");
  EXPECT_EQ(b.trace_bytes, std::filesystem::file_size(file));

  auto store = open_store();
  ASSERT_TRUE(store);
  auto loaded = store->load_trace(b.id);
  ASSERT_TRUE(loaded.ok()) << loaded.error->message;
  ASSERT_EQ(loaded.trace.slices.size(), trace.slices.size());
  for (size_t row = 0; row < trace.slices.size(); row += 97)
    EXPECT_EQ(loaded.trace.slices.dur[row], trace.slices.dur[row]);

  // Every trace as a file (threshold 0): copied in compressed, loaded back the same.
  OpenOptions as_files;
  as_files.file_threshold_bytes = 0;
  auto file_store = open_store(as_files);
  ASSERT_TRUE(file_store);
  opsight::store::TraceFacts facts;
  facts.slice_count = b.slice_count;
  facts.duration_ns = b.duration_ns;
  auto added = file_store->add_native_file(file, facts, metadata_named("copied"));
  ASSERT_TRUE(added.ok()) << added.error();
  const auto stored_file =
      std::filesystem::path(file_store->traces_folder()) / (added.value().uuid + ".opsight.zst");
  ASSERT_TRUE(std::filesystem::is_regular_file(stored_file));
  EXPECT_EQ(added.value().stored_bytes, std::filesystem::file_size(stored_file));
  EXPECT_LT(added.value().stored_bytes, added.value().trace_bytes);
  auto from_file = file_store->load_trace(added.value().id);
  ASSERT_TRUE(from_file.ok()) << from_file.error->message;
  EXPECT_EQ(from_file.trace.slices.size(), trace.slices.size());
  EXPECT_EQ(from_file.trace.instants.size(), 1u);

  // Each run's native bytes written back (what a reader of a stored run reads): into a
  // file, and into an unnamed scratch file that leaves nothing in the traces folder; from
  // the compressed file and from the blob, the same trace.
  auto folder_entries = [&] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(file_store->traces_folder()))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> stored_files = folder_entries();
  for (int64_t id : {added.value().id, b.id}) {
    const std::string copy = (directory_ / "copy.opsight").string();
    ASSERT_FALSE(file_store->write_native_file(id, copy));
    EXPECT_EQ(std::filesystem::file_size(copy), std::filesystem::file_size(file));
    std::string problem;
    const int fd = file_store->open_native_scratch(id, &problem);
    ASSERT_GE(fd, 0) << problem;
    EXPECT_EQ(folder_entries(), stored_files);  // nothing named while it is read
    auto written = opsight::io::read_trace_file(RunStore::descriptor_path(fd));
    ::close(fd);
    ASSERT_TRUE(written.ok()) << written.error->message;
    EXPECT_EQ(written.trace.slices.size(), trace.slices.size());
  }
  // StoredRunFile: a run named by reference, at any size (0) or from a size it lacks.
  {
    auto stored = opsight::store::StoredRunFile::open("copied", path_, 0);
    ASSERT_FALSE(stored.error()) << *stored.error();
    ASSERT_FALSE(stored.path().empty());
    EXPECT_EQ(stored.label().rfind("run " + std::to_string(added.value().id), 0), 0u)
        << stored.label();
    EXPECT_TRUE(opsight::io::read_trace_file(stored.path()).ok());
    EXPECT_EQ(folder_entries(), stored_files);
    EXPECT_TRUE(
        opsight::store::StoredRunFile::open("copied", path_, uint64_t{1} << 40).path().empty());
    EXPECT_TRUE(opsight::store::StoredRunFile::open(file, path_, 0).path().empty());  // a file
    auto none = opsight::store::StoredRunFile::open("nosuchrun", path_, 0);
    ASSERT_TRUE(none.error());
    EXPECT_NE(none.error()->find("no run 'nosuchrun'"), std::string::npos) << *none.error();
  }
  // A run that is not there: an error naming it, and a file already at the path kept.
  const std::string kept = (directory_ / "kept.opsight").string();
  ASSERT_FALSE(opsight::io::write_file_bytes(kept, "already here"));
  auto no_run = file_store->write_native_file(999, kept);
  ASSERT_TRUE(no_run);
  EXPECT_NE(no_run->find("no run 999"), std::string::npos) << *no_run;
  EXPECT_EQ(std::filesystem::file_size(kept), 12u);

  // A file that is not there, and one that is not a trace, are errors naming it.
  request.files = {(directory_ / "gone.opsight").string()};
  auto gone = opsight::store::save_native_file(request);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error->find("gone.opsight"), std::string::npos) << *gone.error;
  const std::string text = (directory_ / "notes.opsight").string();
  ASSERT_FALSE(opsight::io::write_file_bytes(text, "not a trace at all"));
  request.files = {text};
  auto foreign = opsight::store::save_native_file(request);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error->find("notes.opsight"), std::string::npos) << *foreign.error;
  EXPECT_EQ(store->list().value().size(), 3u);  // nothing saved for either
}

// The file name comes from the database: one that would leave the traces folder is refused.
TEST_F(RunStoreTest, ATraceFileNameThatLeavesTheFolderIsRefused) {
  OpenOptions options;
  options.file_threshold_bytes = 0;
  auto store = open_store(options);
  ASSERT_TRUE(store);
  RunRecord run = add(*store, make_trace(10), metadata_named("big"));
  sqlite3* database = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(database, "UPDATE run_traces SET data = CAST('../runs.db' AS BLOB)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(database);
  auto loaded = store->load_trace(run.id);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error->message.find("its trace file name is damaged"), std::string::npos)
      << loaded.error->message;
  ASSERT_TRUE(store->remove(run.id).ok());
  EXPECT_TRUE(std::filesystem::exists(path_));  // nothing outside the folder was removed
}

TEST_F(RunStoreTest, CreatesAMissingDirectoryPrivately) {
  path_ = (directory_ / "home" / "nested" / "runs.db").string();
  auto store = open_store();
  ASSERT_TRUE(store);
  for (auto folder : {directory_ / "home", directory_ / "home" / "nested"}) {
    struct stat info {};
    ASSERT_EQ(::stat(folder.c_str(), &info), 0) << folder;
    EXPECT_EQ(info.st_mode & 0777, 0700u) << folder;
  }
  EXPECT_TRUE(std::filesystem::is_regular_file(path_));
}

TEST_F(RunStoreTest, OpeningWithoutCreateRefusesAMissingStore) {
  auto opened = RunStore::open(path_, {.create = false});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error(), "no run store at " + path_);
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(RunStoreTest, DefaultPathFollowsOpsightHome) {
  const char* saved_home = std::getenv("OPSIGHT_HOME");
  std::string saved = saved_home ? saved_home : "";
  ::setenv("OPSIGHT_HOME", "/data/opsight", 1);
  EXPECT_EQ(RunStore::default_path(), "/data/opsight/runs.db");
  ::unsetenv("OPSIGHT_HOME");
  if (const char* home = std::getenv("HOME")) {
    EXPECT_EQ(RunStore::default_path(), std::string(home) + "/.opsight/runs.db");
  }
  if (saved_home) ::setenv("OPSIGHT_HOME", saved.c_str(), 1);
}

// ---- schema versions -------------------------------------------------------------------

int user_version_of(const std::string& path) {
  sqlite3* database = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &database, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(database, "PRAGMA user_version", -1, &statement, nullptr);
  int version = sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int(statement, 0) : -1;
  sqlite3_finalize(statement);
  sqlite3_close(database);
  return version;
}

void execute(sqlite3* database, const std::string& sql) {
  char* message = nullptr;
  ASSERT_EQ(sqlite3_exec(database, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
      << (message ? message : "") << "\n"
      << sql;
}

TEST_F(RunStoreTest, MigratesAVersionOneStoreMadeByHand) {
  // The version-1 layout as the first release wrote it: the trace inline in `runs`.
  Trace trace = make_trace(20);
  std::string native = opsight::io::write_native(trace);
  std::string compressed(ZSTD_compressBound(native.size()), '\0');
  compressed.resize(
      ZSTD_compress(compressed.data(), compressed.size(), native.data(), native.size(), 3));
  {
    sqlite3* database = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
    execute(database, R"sql(
      CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, uuid TEXT NOT NULL UNIQUE,
        created_unix_ns INTEGER NOT NULL, name TEXT NOT NULL DEFAULT '',
        command TEXT NOT NULL DEFAULT '', working_directory TEXT NOT NULL DEFAULT '',
        git_commit TEXT NOT NULL DEFAULT '', host TEXT NOT NULL DEFAULT '',
        cpu TEXT NOT NULL DEFAULT '', gpu TEXT NOT NULL DEFAULT '',
        slice_count INTEGER NOT NULL DEFAULT 0, duration_ns INTEGER NOT NULL DEFAULT 0,
        source_format TEXT NOT NULL DEFAULT '', trace_codec TEXT NOT NULL,
        trace_bytes INTEGER NOT NULL, trace BLOB NOT NULL);
      CREATE INDEX runs_created ON runs(created_unix_ns);
      CREATE INDEX runs_name ON runs(name);
      CREATE TABLE run_tags (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key));
      CREATE INDEX run_tags_key ON run_tags(key, value);
      CREATE TABLE run_versions (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        package TEXT NOT NULL, version TEXT NOT NULL, PRIMARY KEY (run_id, package));
      PRAGMA user_version = 1;)sql");
    sqlite3_stmt* insert = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(database,
                                 "INSERT INTO runs (uuid, created_unix_ns, name, command, "
                                 "slice_count, duration_ns, source_format, trace_codec, "
                                 "trace_bytes, trace) VALUES ('12345678-0000-4000-8000-"
                                 "000000000001', 1000, 'old run', 'python old.py', 21, 21000, "
                                 "'opsight', 'zstd', ?, ?)",
                                 -1, &insert, nullptr),
              SQLITE_OK);
    sqlite3_bind_int64(insert, 1, static_cast<sqlite3_int64>(native.size()));
    sqlite3_bind_blob(insert, 2, compressed.data(), static_cast<int>(compressed.size()),
                      SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(insert), SQLITE_DONE);
    sqlite3_finalize(insert);
    execute(database,
            "INSERT INTO run_tags VALUES (1, 'branch', 'main');"
            "INSERT INTO run_versions VALUES (1, 'torch', '2.1.0');");
    sqlite3_close(database);
  }
  ASSERT_EQ(user_version_of(path_), 1);

  auto store = open_store();
  ASSERT_TRUE(store);
  EXPECT_EQ(user_version_of(path_), opsight::store::kSchemaVersion);
  auto runs = store->list();
  ASSERT_TRUE(runs.ok()) << runs.error();
  ASSERT_EQ(runs.value().size(), 1u);
  const RunRecord& old = runs.value()[0];
  EXPECT_EQ(old.uuid, "12345678-0000-4000-8000-000000000001");
  EXPECT_EQ(old.metadata.name, "old run");
  EXPECT_EQ(old.metadata.tags, (opsight::store::KeyValues{{"branch", "main"}}));
  EXPECT_EQ(old.metadata.versions, (opsight::store::KeyValues{{"torch", "2.1.0"}}));
  EXPECT_EQ(old.stored_bytes, compressed.size());
  EXPECT_EQ(old.trace_bytes, native.size());
  auto loaded = store->load_trace(old.id);
  ASSERT_TRUE(loaded.ok()) << loaded.error->message;
  EXPECT_EQ(loaded.trace.slices.size(), 21u);
  // Digits name an id when there is one, else they may begin a uuid.
  EXPECT_EQ(store->resolve("1").value().id, 1);
  EXPECT_EQ(store->resolve("12345678").value().id, 1);
  // New runs land beside it, with what version 2 added.
  RunRecord added = add(*store, make_trace(2), metadata_named("new", {{"branch", "main"}}));
  EXPECT_EQ(added.id, 2);
  EXPECT_EQ(store->list({.tag = "branch=main"}).value()[0].metadata.extra,
            (opsight::store::KeyValues{{"os", "Linux"}}));
}

TEST_F(RunStoreTest, RefusesAStoreFromANewerOpsight) {
  {
    sqlite3* database = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
    execute(database, "CREATE TABLE runs (id INTEGER); PRAGMA user_version = 99;");
    sqlite3_close(database);
  }
  auto opened = RunStore::open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.error().find(path_), std::string::npos) << opened.error();
  EXPECT_NE(opened.error().find("schema version 99, newer than this opsight knows"),
            std::string::npos)
      << opened.error();
  EXPECT_EQ(user_version_of(path_), 99);  // untouched
}

TEST_F(RunStoreTest, RefusesAnotherProgramsDatabase) {
  {
    sqlite3* database = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
    execute(database, "CREATE TABLE photos (id INTEGER);");
    sqlite3_close(database);
  }
  auto opened = RunStore::open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error(),
            path_ + ": not an opsight run store (a SQLite database with other tables)");
  // Refused without a change: its journal mode is still the default (not switched to WAL).
  sqlite3* database = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(database, "PRAGMA journal_mode", -1, &statement, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(statement), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)), "delete");
  sqlite3_finalize(statement);
  sqlite3_close(database);
}

// ---- damage ----------------------------------------------------------------------------

TEST_F(RunStoreTest, AFileOfGarbageIsAClearErrorNotACrash) {
  {
    std::ofstream file(path_, std::ios::binary);
    for (int i = 0; i < 10000; ++i) file.put(static_cast<char>(opsight::trace::mix64(i) & 0xFF));
  }
  auto opened = RunStore::open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error(), path_ + ": not a usable run store: file is not a database");
}

TEST_F(RunStoreTest, AStoreCutShortIsReadForWhatIsLeft) {
  {
    auto store = open_store();
    ASSERT_TRUE(store);
    for (int i = 0; i < 30; ++i)
      add(*store, make_trace(200, i), metadata_named("run " + std::to_string(i), {{"i", "x"}}));
  }
  auto full_size = std::filesystem::file_size(path_);
  ASSERT_GT(full_size, 8u * 4096);
  auto cut_copy = [&](uintmax_t size) {
    std::string copy = (directory_ / ("cut-" + std::to_string(size) + ".db")).string();
    std::filesystem::copy_file(path_, copy);
    std::filesystem::resize_file(copy, size);
    return copy;
  };

  // Cut inside the header: nothing to read, a clear error.
  std::string header_cut = cut_copy(50);
  auto unusable = RunStore::open(header_cut);
  ASSERT_FALSE(unusable.ok());
  EXPECT_EQ(unusable.error().rfind(header_cut + ": not a usable run store: ", 0), 0u)
      << unusable.error();

  // Cut after three quarters: opened read-only, what is left is listed and loads, and
  // what was lost is reported per run.
  std::string cut = cut_copy(full_size * 3 / 4);
  auto strict = RunStore::open(cut, {.salvage_damaged = false});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error(), cut + ": not a usable run store: database disk image is malformed");
  auto opened = RunStore::open(cut);
  ASSERT_TRUE(opened.ok()) << opened.error();
  RunStore& store = *opened.value();
  ASSERT_TRUE(store.damage().has_value());
  EXPECT_EQ(*store.damage(), "database disk image is malformed");
  auto listed = store.list();
  ASSERT_TRUE(listed.ok()) << listed.error();
  ASSERT_FALSE(listed.value().empty());
  size_t loaded_runs = 0, lost = 30 - listed.value().size();
  for (const auto& run : listed.value()) {
    EXPECT_EQ(run.metadata.name, "run " + std::to_string(run.id - 1));
    auto loaded = store.load_trace(run.id);
    if (loaded.ok()) {
      EXPECT_EQ(loaded.trace.slices.size(), 201u);
      ++loaded_runs;
    } else {
      EXPECT_EQ(loaded.error->message.rfind("run " + std::to_string(run.id) + " in " + cut, 0), 0u)
          << loaded.error->message;
      ++lost;
    }
  }
  EXPECT_GT(loaded_runs, 0u);
  EXPECT_GT(lost, 0u) << "a quarter of the file is gone, yet every run loaded";
  EXPECT_EQ(store.resolve("latest").value().id, listed.value().front().id);
  EXPECT_EQ(store.list({.limit = 2}).value().size(), std::min<size_t>(2, listed.value().size()));

  auto refused = store.add(make_trace(2), metadata_named("new"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().rfind(cut + ": cannot save the run: the run store is damaged", 0), 0u)
      << refused.error();
  EXPECT_FALSE(store.remove(1).ok());
  EXPECT_FALSE(store.apply_retention({.keep_last = 1}).ok());
}

// Flips bytes of run `id`'s trace blob inside the database file itself.
void damage_trace_blob_in_file(const std::string& path, int64_t id) {
  std::string blob;
  {
    sqlite3* database = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &database, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* select = nullptr;
    sqlite3_prepare_v2(database, "SELECT data FROM run_traces WHERE run_id = ?", -1, &select,
                       nullptr);
    sqlite3_bind_int64(select, 1, id);
    ASSERT_EQ(sqlite3_step(select), SQLITE_ROW);
    blob.assign(static_cast<const char*>(sqlite3_column_blob(select, 0)),
                static_cast<size_t>(sqlite3_column_bytes(select, 0)));
    sqlite3_finalize(select);
    sqlite3_close(database);
  }
  std::string file_bytes;
  {
    std::ifstream file(path, std::ios::binary);
    file_bytes.assign(std::istreambuf_iterator<char>(file), {});
  }
  ASSERT_GT(blob.size(), 64u);
  size_t found = std::string::npos;
  for (size_t offset = blob.size() / 2; offset + 32 < blob.size() && found == std::string::npos;
       offset += 16)
    if (size_t at = file_bytes.find(blob.substr(offset, 32)); at != std::string::npos) found = at;
  ASSERT_NE(found, std::string::npos) << "the blob's bytes are not in the file";
  for (size_t i = 8; i < 24; ++i) file_bytes[found + i] = static_cast<char>(~file_bytes[found + i]);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(file_bytes.data(), static_cast<std::streamsize>(file_bytes.size()));
}

TEST_F(RunStoreTest, ADamagedTraceBlobLeavesTheOtherRunsReadable) {
  {
    auto store = open_store();
    ASSERT_TRUE(store);
    for (int i = 0; i < 3; ++i) add(*store, make_trace(3000, i), metadata_named("r"));
  }
  ASSERT_FALSE(std::filesystem::exists(path_ + "-wal") &&
               std::filesystem::file_size(path_ + "-wal") > 0)
      << "closing the last connection should have checkpointed the WAL";
  damage_trace_blob_in_file(path_, 2);

  auto store = open_store();
  ASSERT_TRUE(store);
  auto listed = store->list();
  ASSERT_TRUE(listed.ok()) << listed.error();
  EXPECT_EQ(ids_of(listed.value()), (std::vector<int64_t>{3, 2, 1}));
  for (int64_t id : {1, 3}) {
    auto loaded = store->load_trace(id);
    ASSERT_TRUE(loaded.ok()) << loaded.error->message;
    EXPECT_EQ(loaded.trace.slices.size(), 3001u);
  }
  auto damaged = store->load_trace(2);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(
      damaged.error->message.rfind("run 2 in " + path_ + ": its stored trace is damaged: ", 0), 0u)
      << damaged.error->message;
  // The store still takes new runs.
  EXPECT_EQ(add(*store, make_trace(2), metadata_named("after")).id, 4);
}

TEST_F(RunStoreTest, ATraceBlobThatIsNotZstdIsReportedWithItsRun) {
  {
    auto store = open_store();
    ASSERT_TRUE(store);
    add(*store, make_trace(5), metadata_named("a"));
    add(*store, make_trace(5), metadata_named("b"));
  }
  {
    sqlite3* database = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &database), SQLITE_OK);
    execute(database, "UPDATE run_traces SET data = X'00112233445566778899' WHERE run_id = 1");
    sqlite3_close(database);
  }
  auto store = open_store();
  ASSERT_TRUE(store);
  auto damaged = store->load_trace(1);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.error->message,
            "run 1 in " + path_ + ": its stored trace is damaged: not a zstd frame");
  EXPECT_TRUE(store->load_trace(2).ok());
}

// ---- concurrency -----------------------------------------------------------------------

TEST_F(RunStoreTest, ProcessesSavingAtOnceAllLand) {
  // Real processes, released together on a fresh (not yet created) store: they race for
  // the creation, the migration and every save.
  constexpr int kProcesses = 6;
  constexpr int kRunsEach = 8;
  int release[2];
  ASSERT_EQ(::pipe(release), 0);
  std::vector<pid_t> children;
  for (int child = 0; child < kProcesses; ++child) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(release[1]);
      char byte;
      while (::read(release[0], &byte, 1) < 0) {
      }
      auto opened = RunStore::open(path_);
      if (!opened.ok()) {
        std::fprintf(stderr, "child %d: %s\n", child, opened.error().c_str());
        std::_Exit(10);
      }
      for (int i = 0; i < kRunsEach; ++i) {
        auto added =
            opened.value()->add(make_trace(500, child * 100 + i),
                                metadata_named("child", {{"child", std::to_string(child)}}));
        if (!added.ok()) {
          std::fprintf(stderr, "child %d: %s\n", child, added.error().c_str());
          std::_Exit(11);
        }
      }
      opened.value().reset();
      std::_Exit(0);
    }
    children.push_back(pid);
  }
  ::close(release[0]);
  ::close(release[1]);  // end of file: every child starts now
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  auto store = open_store();
  ASSERT_TRUE(store);
  auto listed = store->list();
  ASSERT_TRUE(listed.ok()) << listed.error();
  ASSERT_EQ(listed.value().size(), size_t{kProcesses * kRunsEach});
  std::set<std::string> uuids;
  for (const auto& run : listed.value()) {
    uuids.insert(run.uuid);
    auto loaded = store->load_trace(run.id);
    ASSERT_TRUE(loaded.ok()) << loaded.error->message;
    EXPECT_EQ(loaded.trace.slices.size(), 501u);
  }
  EXPECT_EQ(uuids.size(), listed.value().size());
  for (int child = 0; child < kProcesses; ++child)
    EXPECT_EQ(store->list({.tag = "child=" + std::to_string(child)}).value().size(),
              size_t{kRunsEach});
}

TEST_F(RunStoreTest, ThreadsSharingOneStoreAllLand) {
  auto store = open_store();
  ASSERT_TRUE(store);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&, thread] {
      for (int i = 0; i < 10; ++i) {
        if (!store->add(make_trace(20, thread * 10 + i), metadata_named("t")).ok()) ++failures;
        if (!store->list({.limit = 3}).ok()) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->list().value().size(), 40u);
}

// ---- metadata --------------------------------------------------------------------------

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST_F(RunStoreTest, GitCommitFromLooseRefsPackedRefsDetachedHeadsAndWorktrees) {
  const std::string commit_a = "0123456789abcdef0123456789abcdef01234567";
  const std::string commit_b = "89abcdef0123456789abcdef0123456789abcdef";
  auto repository = directory_ / "repo";
  std::filesystem::create_directories(repository / "src" / "deep");
  EXPECT_EQ(git_commit_of((repository / "src").string()), "");  // no .git yet

  write_text(repository / ".git" / "HEAD", "ref: refs/heads/main\n");
  EXPECT_EQ(git_commit_of(repository.string()), "");  // unborn branch
  write_text(repository / ".git" / "packed-refs", "# pack-refs with: peeled fully-peeled sorted\n" +
                                                      commit_b + " refs/heads/main\n^" + commit_a +
                                                      "\n");
  EXPECT_EQ(git_commit_of((repository / "src" / "deep").string()), commit_b);
  write_text(repository / ".git" / "refs" / "heads" / "main", commit_a + "\n");
  EXPECT_EQ(git_commit_of((repository / "src").string()), commit_a);  // loose wins
  write_text(repository / ".git" / "HEAD", commit_b + "\n");
  EXPECT_EQ(git_commit_of(repository.string()), commit_b);  // detached

  // A worktree: .git is a file naming its git directory, whose commondir holds the refs.
  write_text(repository / ".git" / "HEAD", "ref: refs/heads/main\n");
  auto worktree = directory_ / "worktree";
  write_text(repository / ".git" / "worktrees" / "wt" / "HEAD", "ref: refs/heads/feature\n");
  write_text(repository / ".git" / "worktrees" / "wt" / "commondir", "../..\n");
  write_text(repository / ".git" / "refs" / "heads" / "feature", commit_b + "\n");
  write_text(worktree / ".git", "gitdir: " + (repository / ".git" / "worktrees" / "wt").string());
  EXPECT_EQ(git_commit_of(worktree.string()), commit_b);

  write_text(repository / ".git" / "HEAD", "garbage\n");
  EXPECT_EQ(git_commit_of(repository.string()), "");
}

TEST_F(RunStoreTest, HostMetadataNamesThisMachine) {
  RunMetadata metadata = collect_host_metadata(directory_.string());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(metadata.host, host);
  EXPECT_EQ(metadata.working_directory, directory_.string());
  EXPECT_NE(metadata.cpu.find("logical CPU"), std::string::npos) << metadata.cpu;
  bool has_nvidia = std::filesystem::exists("/proc/driver/nvidia/gpus");
  EXPECT_EQ(metadata.gpu == "none", !has_nvidia) << metadata.gpu;
  EXPECT_EQ(metadata.git_commit, "");  // a temporary directory is in no repository
  ASSERT_EQ(metadata.versions.size(), 1u);
  EXPECT_EQ(metadata.versions[0].first, "opsight");
  EXPECT_FALSE(metadata.versions[0].second.empty());
  ASSERT_EQ(metadata.extra.size(), 1u);
  EXPECT_EQ(metadata.extra[0].first, "os");
}

}  // namespace
