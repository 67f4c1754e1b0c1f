// DimVector: a small vector of int64_t for sizes and strides, inline up to kInline dims so that
// creating a view allocates nothing but the tensor itself (the meta-op dispatch budget is ~100 ns).
//   DimVector s{2, 3, 4};  s.push_back(5);  int64_t n = s[0];
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <vector>

#include "base/error.h"

namespace shardplan {

class DimVector {
 public:
  static constexpr size_t kInline = 6;

  DimVector() = default;
  explicit DimVector(size_t n, int64_t value = 0) { resize(n, value); }
  DimVector(std::initializer_list<int64_t> il) { assign(il.begin(), il.end()); }
  DimVector(std::span<const int64_t> s) {
    assign(s.begin(), s.end());
  }  // NOLINT: implicit on purpose
  DimVector(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT
  DimVector(const DimVector& o) { copy_from(o); }
  DimVector(DimVector&& o) noexcept { steal(std::move(o)); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  DimVector& operator=(DimVector&& o) noexcept {
    if (this != &o) steal(std::move(o));
    return *this;
  }
  ~DimVector() = default;

  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data()[size_++] = static_cast<int64_t>(*first);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& back() { return data()[size_ - 1]; }
  int64_t back() const { return data()[size_ - 1]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }  // NOLINT
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  void reserve(size_t n) {
    if (n <= capacity()) return;
    auto p = std::make_unique<int64_t[]>(n);
    std::copy(begin(), end(), p.get());
    heap_ = std::move(p);
    heap_cap_ = n;
  }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    int64_t* p = data();
    for (size_t i = size_; i < n; ++i) p[i] = value;
    size_ = n;
  }
  void push_back(int64_t v) {
    if (size_ == capacity()) reserve(std::max<size_t>(2 * capacity(), 8));
    data()[size_++] = v;
  }
  void pop_back() { --size_; }
  void insert(size_t pos, int64_t v) {
    push_back(0);
    std::copy_backward(begin() + pos, end() - 1, end());
    data()[pos] = v;
  }
  void erase(size_t pos) {
    std::copy(begin() + pos + 1, end(), begin() + pos);
    --size_;
  }
  void clear() { size_ = 0; }

  friend bool operator==(const DimVector& a, const DimVector& b) {
    // A plain loop: shapes are short, and std::equal's memcmp call cost more than the compare.
    if (a.size_ != b.size_) return false;
    const int64_t* pa = a.data();
    const int64_t* pb = b.data();
    for (size_t i = 0; i < a.size_; ++i) {
      if (pa[i] != pb[i]) return false;
    }
    return true;
  }

 private:
  size_t capacity() const { return heap_ ? heap_cap_ : kInline; }
  // Copies of shapes that fit inline (nearly all) move a fixed kInline words: a constant-size
  // memcpy compiles to a few vector moves, where a size-dependent loop or memmove call cost more
  // than the rest of a view op. Reading kInline words is in bounds: inline storage has kInline,
  // and a heap buffer has more (it is only allocated beyond kInline).
  void copy_from(const DimVector& o) {
    if (o.size_ <= kInline) {
      heap_.reset();
      std::memcpy(inline_, o.data(), sizeof(inline_));
      size_ = o.size_;
      return;
    }
    assign(o.begin(), o.end());
  }
  void steal(DimVector&& o) {
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      heap_cap_ = o.heap_cap_;
    } else {
      heap_.reset();
      std::memcpy(inline_, o.inline_, sizeof(inline_));
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  int64_t inline_[kInline] = {};
  std::unique_ptr<int64_t[]> heap_;
  size_t heap_cap_ = 0;
  size_t size_ = 0;
};

// Prints like PyTorch's sizes: [2, 3, 4].
inline std::ostream& operator<<(std::ostream& os, const DimVector& d) {
  return ::shardplan::operator<<(os, std::span<const int64_t>(d));
}

}  // namespace shardplan
