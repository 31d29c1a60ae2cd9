// Internal: a vector of int64 with inline room for the ranks kernels use, spilling to the heap
// beyond that, so that shapes and views of any rank cost no allocation in the common case.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>

namespace tessera::detail {

class SmallVec {
 public:
  static constexpr int kInline = 6;

  SmallVec() noexcept {}
  explicit SmallVec(int n, int64_t fill = 0) { resize(n, fill); }
  SmallVec(std::initializer_list<int64_t> v) { assign(v.begin(), static_cast<int>(v.size())); }
  template <class It>
  requires(!std::is_integral_v<It>) SmallVec(It first, It last) {
    resize(static_cast<int>(std::distance(first, last)));
    std::copy(first, last, data());
  }
  // Copies and moves of inline vectors copy the inline array as one fixed-size block, without
  // first zeroing it (the default member initializer is skipped). A heap copy is out of line,
  // so that the inline copy is a few moves wherever it is inlined (refs and block indices are
  // copied at every grid step).
  SmallVec(const SmallVec& o) : size_(o.size_), inline_(o.inline_) {
    if (o.heap_) [[unlikely]]
      copy_heap(o);
  }
  SmallVec(SmallVec&& o) noexcept
      : size_(o.size_), cap_(o.cap_), inline_(o.inline_), heap_(std::move(o.heap_)) {
    if (heap_) {
      o.cap_ = kInline;
      o.size_ = 0;
    }
  }
  SmallVec& operator=(const SmallVec& o) {
    if (this == &o) return *this;
    if (!o.heap_ && !heap_) {
      copy_inline(o);
    } else {
      assign(o.data(), o.size_);
    }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this == &o) return *this;
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      cap_ = o.cap_;
      size_ = o.size_;
      o.cap_ = kInline;
      o.size_ = 0;
    } else if (!heap_) {
      copy_inline(o);
    } else {
      assign(o.data(), o.size_);
    }
    return *this;
  }

  int size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  int64_t* data() noexcept { return heap_ ? heap_.get() : inline_.v; }
  const int64_t* data() const noexcept { return heap_ ? heap_.get() : inline_.v; }
  int64_t& operator[](int i) noexcept { return data()[i]; }
  int64_t operator[](int i) const noexcept { return data()[i]; }
  int64_t* begin() noexcept { return data(); }
  int64_t* end() noexcept { return data() + size_; }
  const int64_t* begin() const noexcept { return data(); }
  const int64_t* end() const noexcept { return data() + size_; }
  int64_t back() const noexcept { return data()[size_ - 1]; }

  void resize(int n, int64_t fill = 0) {
    reserve(n);
    for (int i = size_; i < n; ++i) data()[i] = fill;
    size_ = n;
  }
  /// Sets the size to `n` without writing the elements: those past the old size are unspecified
  /// until the caller writes them (a fill loop compiles to a call to memset).
  void resize_for_overwrite(int n) {
    reserve(n);
    size_ = n;
  }
  void push_back(int64_t v) {
    reserve(size_ + 1);
    data()[size_++] = v;
  }
  void insert_front(int64_t v) {
    reserve(size_ + 1);
    int64_t* d = data();
    std::copy_backward(d, d + size_, d + size_ + 1);
    d[0] = v;
    ++size_;
  }
  void erase(int i) {
    int64_t* d = data();
    std::copy(d + i + 1, d + size_, d + i);
    --size_;
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) noexcept {
    if (a.size_ != b.size_) return false;
    const int64_t* x = a.data();
    const int64_t* y = b.data();
    for (int i = 0; i < a.size_; ++i) {  // a plain loop: std::equal calls memcmp
      if (x[i] != y[i]) return false;
    }
    return true;
  }

 private:
  // Both inline: copies the whole inline array, a fixed-size copy that compiles to a few moves
  // (a loop over size_ elements compiles to a call to memcpy).
  void copy_inline(const SmallVec& o) noexcept {
    inline_ = o.inline_;
    size_ = o.size_;
  }
  [[gnu::noinline]] void copy_heap(const SmallVec& o) {
    size_ = 0;
    assign(o.heap_.get(), o.size_);
  }
  void assign(const int64_t* src, int n) {
    size_ = 0;
    reserve(n);
    int64_t* d = data();
    for (int i = 0; i < n; ++i) d[i] = src[i];  // a plain loop: ranks are tiny, no memmove call
    size_ = n;
  }
  void reserve(int n) {
    if (n <= cap_) return;
    int cap = std::max(n, cap_ * 2);
    std::unique_ptr<int64_t[]> h(new int64_t[static_cast<size_t>(cap)]);
    std::copy(data(), data() + size_, h.get());
    heap_ = std::move(h);
    cap_ = cap;
  }

  int size_ = 0;
  int cap_ = kInline;
  // Zeroed on construction (a few stores), so that copy_inline copies defined values; a struct,
  // so that it copies as one block.
  struct Inline {
    int64_t v[kInline] = {};
  };
  Inline inline_;
  std::unique_ptr<int64_t[]> heap_;
};

}  // namespace tessera::detail
