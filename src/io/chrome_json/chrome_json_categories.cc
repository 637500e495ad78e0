#include "io/chrome_json/chrome_json_categories.hpp"

#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/categories.hpp"

namespace opsight::io::chrome_json {
namespace {

// How a tool's own category maps to a canonical one (trace/categories.hpp). A rule with a
// name pattern applies only to slices whose name matches it; the first rule that matches a
// (category, name) pair wins, and a category no rule matches is kept as written.
struct CategoryRule {
  enum class NameMatch : uint8_t { kAny, kPrefix, kSuffix };
  std::string_view source;
  std::string_view canonical;
  NameMatch match = NameMatch::kAny;
  std::string_view pattern;  // for kPrefix / kSuffix
};

using Match = CategoryRule::NameMatch;

// PyTorch profiler (Kineto) categories: the current names, plus the capitalised ones the
// first Kineto releases (PyTorch 1.8) wrote.
constexpr CategoryRule kPyTorchCategoryRules[] = {
    {"cpu_op", trace::kCategoryOperator, Match::kAny, {}},
    {"Operator", trace::kCategoryOperator, Match::kAny, {}},
    {"kernel", trace::kCategoryGpuKernel, Match::kAny, {}},
    {"Kernel", trace::kCategoryGpuKernel, Match::kAny, {}},
    {"gpu_memcpy", trace::kCategoryGpuMemcpy, Match::kAny, {}},
    {"Memcpy", trace::kCategoryGpuMemcpy, Match::kAny, {}},
    {"gpu_memset", trace::kCategoryGpuMemset, Match::kAny, {}},
    {"Memset", trace::kCategoryGpuMemset, Match::kAny, {}},
    {"cuda_sync", trace::kCategoryGpuSync, Match::kAny, {}},
    {"cuda_runtime", trace::kCategoryCudaRuntime, Match::kAny, {}},
    {"cuda_driver", trace::kCategoryCudaRuntime, Match::kAny, {}},
    {"Runtime", trace::kCategoryCudaRuntime, Match::kAny, {}},
    {"python_function", trace::kCategoryModule, Match::kPrefix, "nn.Module: "},
    {"python_function", trace::kCategoryPython, Match::kAny, {}},
    {"user_annotation", trace::kCategoryAnnotation, Match::kAny, {}},
    {"gpu_user_annotation", trace::kCategoryAnnotation, Match::kAny, {}},
    {"Trace", trace::kCategoryProfiler, Match::kAny, {}},
    {"overhead", trace::kCategoryProfiler, Match::kAny, {}},
};

// ONNX Runtime profile categories (its EventCategory: Session, Node, Kernel, Api). A Node
// event that is neither a kernel's time nor a fence keeps its category.
constexpr CategoryRule kOnnxRuntimeCategoryRules[] = {
    {"Session", trace::kCategorySession, Match::kAny, {}},
    {"Node", trace::kCategoryOperator, Match::kSuffix, "_kernel_time"},
    {"Node", trace::kCategoryOperatorFence, Match::kSuffix, "_fence_before"},
    {"Node", trace::kCategoryOperatorFence, Match::kSuffix, "_fence_after"},
    {"Kernel", trace::kCategoryGpuKernel, Match::kAny, {}},
    {"Api", trace::kCategoryCudaRuntime, Match::kAny, {}},
};

bool rule_matches_name(const CategoryRule& rule, std::string_view name) {
  switch (rule.match) {
    case Match::kAny:
      return true;
    case Match::kPrefix:
      return name.substr(0, rule.pattern.size()) == rule.pattern;
    case Match::kSuffix:
      return name.size() >= rule.pattern.size() &&
             name.substr(name.size() - rule.pattern.size()) == rule.pattern;
  }
  return false;
}

// Rewrites the category column of slices and instants by `rules`, after every event was
// read (the source format is known only then), and records the entries that applied to at
// least one row in run.extra under trace::kCategoryMapKey. One pass over the category
// column; names are looked at only for categories with a name-dependent rule, once each.
class CategoryMapper {
 public:
  CategoryMapper(trace::Trace& trace, const CategoryRule* rules, size_t rule_count)
      : trace_(trace), rules_(rules, rules + rule_count), used_(rule_count, false) {
    for (size_t rule = 0; rule < rule_count; ++rule) {
      auto source = trace.strings.find(rules_[rule].source);
      if (!source) continue;
      if (*source >= first_rule_of_category_.size())
        first_rule_of_category_.resize(*source + 1, kNoRule);
      if (first_rule_of_category_[*source] == kNoRule)
        first_rule_of_category_[*source] = static_cast<uint32_t>(rule);
      source_ids_.push_back(*source);
    }
  }

  void apply() {
    if (source_ids_.empty()) return;
    for (const CategoryRule& rule : rules_) canonical_ids_.push_back(trace_.intern(rule.canonical));
    remap(trace_.slices.category, trace_.slices.name);
    remap(trace_.instants.category, trace_.instants.name);
    std::string map;
    for (size_t rule = 0; rule < rules_.size(); ++rule) {
      // A category already canonical (cuda_runtime, gpu_memcpy...) is not listed.
      if (!used_[rule] || rules_[rule].source == rules_[rule].canonical) continue;
      if (!map.empty()) map += ',';
      map += rules_[rule].source;
      if (rules_[rule].match != Match::kAny) {
        map += '[';
        if (rules_[rule].match == Match::kSuffix) map += '*';
        map += rules_[rule].pattern;
        if (rules_[rule].match == Match::kPrefix) map += '*';
        map += ']';
      }
      map += '=';
      map += rules_[rule].canonical;
    }
    if (!map.empty()) trace_.run.extra.emplace_back(trace::kCategoryMapKey, std::move(map));
  }

 private:
  static constexpr uint32_t kNoRule = std::numeric_limits<uint32_t>::max();

  // The rule for (category, name), kNoRule if none; `category` has at least one rule.
  uint32_t rule_for(trace::StringId category, trace::StringId name) {
    uint32_t first = first_rule_of_category_[category];
    if (rules_[first].match == Match::kAny) return first;
    uint64_t key = (static_cast<uint64_t>(category) << 32) | name;
    if (auto found = rule_by_category_and_name_.find(key);
        found != rule_by_category_and_name_.end())
      return found->second;
    uint32_t chosen = kNoRule;
    std::string_view name_text = trace_.str(name);
    for (uint32_t rule = first; rule < rules_.size(); ++rule) {
      if (rules_[rule].source != rules_[first].source) continue;
      if (rule_matches_name(rules_[rule], name_text)) {
        chosen = rule;
        break;
      }
    }
    rule_by_category_and_name_.emplace(key, chosen);
    return chosen;
  }

  template <typename Column>
  void remap(Column& categories, const Column& names) {
    const size_t known = first_rule_of_category_.size();
    for (size_t row = 0; row < categories.size(); ++row) {
      trace::StringId category = categories[row];
      if (category >= known || first_rule_of_category_[category] == kNoRule) continue;
      uint32_t rule = rule_for(category, names[row]);
      if (rule == kNoRule) continue;
      categories[row] = canonical_ids_[rule];
      used_[rule] = true;
    }
  }

  trace::Trace& trace_;
  std::vector<CategoryRule> rules_;
  std::vector<bool> used_;
  std::vector<uint32_t> first_rule_of_category_;  // by category StringId
  std::vector<trace::StringId> source_ids_;
  std::vector<trace::StringId> canonical_ids_;  // by rule
  std::unordered_map<uint64_t, uint32_t> rule_by_category_and_name_;
};

}  // namespace

void map_pytorch_categories(trace::Trace& trace) {
  CategoryMapper(trace, kPyTorchCategoryRules, std::size(kPyTorchCategoryRules)).apply();
}

void map_onnxruntime_categories(trace::Trace& trace) {
  CategoryMapper(trace, kOnnxRuntimeCategoryRules, std::size(kOnnxRuntimeCategoryRules)).apply();
}

}  // namespace opsight::io::chrome_json
