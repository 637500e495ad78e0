// A compact, append-only column of durations: what a streaming report keeps per span name
// so that its percentiles stay exact without the trace model (issue 28: at most 16 bytes a
// slice). Values are stored 4 bytes each while they fit in a uint32 (durations under 4.29 s,
// nearly every span), 8 bytes from the first one that does not, per block: blocks grow
// geometrically (16 values, then as many as the column holds, up to 64 Ki values), so a name
// seen once costs 64 bytes and a name seen ten million times about 4 bytes a value, and a
// block is never reallocated (no copy of the column as it grows).
//
// Thread-safety: none; one owner appends, then reads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace opsight::analyze {

class DurationColumn {
 public:
  static constexpr size_t kFirstBlock = 16;
  static constexpr size_t kLargestBlock = size_t{1} << 16;

  void append(int64_t value) {
    if (blocks_.empty() || blocks_.back().size == blocks_.back().capacity) add_block();
    Block& block = blocks_.back();
    if (block.wide == nullptr) {
      if (value >= 0 && value <= static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) {
        block.narrow[block.size++] = static_cast<uint32_t>(value);
        ++size_;
        return;
      }
      widen(block);
    }
    block.wide[block.size++] = value;
    ++size_;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends every value, in order, to `out`.
  void copy_to(std::vector<int64_t>& out) const {
    out.reserve(out.size() + size_);
    for (const Block& block : blocks_) {
      if (block.wide != nullptr)
        out.insert(out.end(), block.wide.get(), block.wide.get() + block.size);
      else
        out.insert(out.end(), block.narrow.get(), block.narrow.get() + block.size);
    }
  }

  // Calls fn(value) for every value, in order (no copy).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Block& block : blocks_) {
      if (block.wide != nullptr)
        for (size_t i = 0; i < block.size; ++i) fn(block.wide[i]);
      else
        for (size_t i = 0; i < block.size; ++i) fn(static_cast<int64_t>(block.narrow[i]));
    }
  }

  // Bytes the column holds (its blocks' capacity), for the memory figures.
  size_t bytes() const {
    size_t total = 0;
    for (const Block& block : blocks_)
      total += block.capacity * (block.wide != nullptr ? sizeof(int64_t) : sizeof(uint32_t));
    return total;
  }

  void clear() {
    blocks_.clear();
    blocks_.shrink_to_fit();
    size_ = 0;
  }

 private:
  struct Block {
    std::unique_ptr<uint32_t[]> narrow;
    std::unique_ptr<int64_t[]> wide;  // once a value does not fit in 32 bits
    size_t size = 0;
    size_t capacity = 0;
  };

  void add_block() {
    Block block;
    block.capacity = std::clamp(size_, kFirstBlock, kLargestBlock);
    block.narrow.reset(new uint32_t[block.capacity]);
    blocks_.push_back(std::move(block));
  }

  static void widen(Block& block) {
    block.wide.reset(new int64_t[block.capacity]);
    for (size_t index = 0; index < block.size; ++index) block.wide[index] = block.narrow[index];
    block.narrow.reset();
  }

  std::vector<Block> blocks_;
  size_t size_ = 0;
};

}  // namespace opsight::analyze
