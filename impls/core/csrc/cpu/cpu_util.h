// Host helpers for the CPU kernels: index range checks, and deterministic scatter-adds.
//
// Many kernels add rows of per-item products into shared rows (core gradients, pooled rows). They never
// race or lock, in one of two ways: items ordered by destination (a stable sort), each destination's run
// summed whole by one thread (parallel_runs); or items in their own order, cut into chunks whose count depends
// on the sizes only, each chunk adding into its own copy, the copies summed in chunk order
// (chunked_scatter_add). Either way the result is bit-identical from run to run and whatever the thread count.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace dlrmbench {

// Raise ValueError naming the op, the index tensor and the first entry outside [0, limit). The scan runs in
// parallel; the first bad entry is searched for (serially) only when there is one.
inline void check_range(const char* op, const char* name, const int64_t* v, int64_t n, int64_t limit) {
  std::atomic<bool> bad{false};
  at::parallel_for(0, n, 1 << 15, [&](int64_t i0, int64_t i1) {
    bool out = false;
    for (int64_t i = i0; i < i1; ++i) out |= v[i] < 0 || v[i] >= limit;
    if (out) bad = true;
  });
  for (int64_t i = 0; bad && i < n; ++i) {
    TORCH_CHECK_VALUE(v[i] >= 0 && v[i] < limit, op, ": ", name, "[", i, "] = ", v[i], " is outside [0, ", limit,
                      ")");
  }
}

// Raise ValueError naming the op and the first item whose row (prefix id * p_last + last digit) is not below
// num_rows, the table's rows (its cores may cover more: padding no id may read); num_rows < 0: no such limit.
// The items' group and last digit are in range already.
inline void check_item_rows(const char* op, const int64_t* ids, const int64_t* grp, const int64_t* last, int64_t n,
                            int64_t p_last, int64_t num_rows) {
  if (num_rows < 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = ids[grp[i]] * p_last + last[i];
    TORCH_CHECK_VALUE(row < num_rows, op, ": item ", i, " reads row ", row, " (prefix id ", ids[grp[i]], " * ",
                      p_last, " + last digit ", last[i], ") of a table of ", num_rows,
                      " rows: the id is out of range (rows past ", num_rows, " are the TT shape's padding)");
  }
}

// x / d for 0 <= x < 2^63 and a divisor d >= 1 fixed for a loop, by one multiply and a shift (Granlund and
// Montgomery's round-up method: m = ceil(2^(63 + l) / d) with 2^l >= d, which fits 64 bits and is exact for
// every such x). A 64-bit division costs 25+ cycles on the CPUs this runs on; a loop dividing each id by the same
// divisor spent most of its time there.
struct DivideBy {
  uint64_t m = 0;
  int shift = 0;
  explicit DivideBy(int64_t d) {
    TORCH_CHECK(d >= 1, "DivideBy: the divisor must be >= 1, got ", d);
    int l = 0;
    while (l < 63 && (uint64_t{1} << l) < static_cast<uint64_t>(d)) ++l;
    shift = 63 + l;
    const unsigned __int128 top = static_cast<unsigned __int128>(1) << shift;
    m = static_cast<uint64_t>((top + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d));
  }
  int64_t operator()(int64_t x) const {
    return static_cast<int64_t>((static_cast<unsigned __int128>(static_cast<uint64_t>(x)) * m) >> shift);
  }
};

// A cache-line request that the compiler keeps even when nothing else uses the address (GCC drops a
// __builtin_prefetch whose loop has no other effect).
inline void prefetch(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Every cache line of a row of D floats (a gathered row, requested a few rows ahead of its use).
inline void prefetch_row(const float* row, int64_t D) {
  for (int64_t k = 0; k < D; k += 16) prefetch(row + k);
}

inline void add_row(float* __restrict__ dst, const float* __restrict__ src, int64_t D) {
  for (int64_t k = 0; k < D; ++k) dst[k] += src[k];
}

// 0..n-1 stably ordered by key(i) in [0, radix): a counting sort when the radix is small next to n, else a
// stable comparison sort (a destination table can have far more rows than a batch touches).
template <typename KeyFn>
std::vector<int64_t> order_by_key(int64_t n, int64_t radix, KeyFn key) {
  std::vector<int64_t> order(n);
  if (radix <= 2 * n + 4096) {
    std::vector<int64_t> start(radix + 1, 0);
    for (int64_t i = 0; i < n; ++i) ++start[key(i) + 1];
    for (int64_t k = 0; k < radix; ++k) start[k + 1] += start[k];
    for (int64_t i = 0; i < n; ++i) order[start[key(i)]++] = i;
    return order;
  }
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
  return order;
}

// fn(scratch, key, b, e) for every maximal run order[b, e) of one key, in parallel over positions: a run
// belongs to the chunk it starts in and is processed whole there, so every key's entries are summed by one
// thread in `order`. make() builds one thread's scratch, once per chunk that starts a run.
template <typename KeyFn, typename MakeScratch, typename Fn>
void parallel_runs(const std::vector<int64_t>& order, int64_t grain, KeyFn key, MakeScratch make, Fn fn) {
  const int64_t n = static_cast<int64_t>(order.size());
  at::parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
    int64_t i = lo;
    while (i > 0 && i < hi && key(order[i]) == key(order[i - 1])) ++i;  // that run began in an earlier chunk
    if (i >= hi) return;
    auto scratch = make();
    while (i < hi) {
      const auto k = key(order[i]);
      int64_t e = i + 1;
      while (e < n && key(order[e]) == k) ++e;
      fn(scratch, k, i, e);
      i = e;
    }
  });
}

// A kernel's temporary array of n T, reused from call to call by the same thread (one per Tag): a fresh allocation of
// a few MiB is fresh pages from the OS, each first touch a page fault (~1 ms per few MiB, a visible share of a step
// of EcoRec's). It grows to the largest request of its Tag and thread and is kept until the thread ends. Contents
// are left from the last use (callers write before they read). A use nested inside another of the same Tag on the
// same thread, or one larger than kMaxKeptBytes (never kept: a huge batch's scratch is not held after it), gets a
// fresh allocation.
constexpr size_t kMaxKeptBytes = size_t{256} << 20;

template <typename T, typename Tag>
class Reused {
 public:
  explicit Reused(size_t n) {
    Slot& s = slot();
    if (s.busy || n * sizeof(T) > kMaxKeptBytes) {
      own_.reset(new T[n]);
      p_ = own_.get();
      return;
    }
    s.busy = true;
    held_ = &s;
    if (s.buf.size() < n) s.buf.resize(n);
    p_ = s.buf.data();
  }
  ~Reused() {
    if (held_) held_->busy = false;
  }
  Reused(const Reused&) = delete;
  Reused& operator=(const Reused&) = delete;
  T* get() const { return p_; }

 private:
  struct Slot {
    std::vector<T> buf;
    bool busy = false;
  };
  static Slot& slot() {
    thread_local Slot s;
    return s;
  }
  Slot* held_ = nullptr;
  std::unique_ptr<T[]> own_;
  T* p_ = nullptr;
};

struct ChunkCopiesTag;  // the chunk copies of every scatter-add below share one buffer per thread

// A deterministic scatter-add that keeps the items' own (streaming) order: [0, n) is cut into `chunks`
// chunks (a number that depends on the sizes only, never on the thread count), each boundary moved up to
// align(b) (e.g. the next group start); chunk c runs add(lo, hi, buf) into its own zeroed (rows x width) copy of
// dst (chunk 0 into dst itself), and the copies are then added into dst in chunk order.
template <typename Align, typename Fn>
void chunked_scatter_add_in(int64_t chunks, int64_t n, int64_t rows, int64_t width, float* dst, Align align,
                            Fn add) {
  const int64_t size = rows * width;
  chunks = std::max<int64_t>(1, std::min(chunks, n));
  const Reused<float, ChunkCopiesTag> copies((chunks - 1) * size);  // zeroed by each chunk's own thread
  const int64_t per = (n + chunks - 1) / chunks;
  std::vector<int64_t> bound(chunks + 1, n);
  bound[0] = 0;
  for (int64_t c = 1; c < chunks; ++c) bound[c] = std::max(bound[c - 1], std::min(n, align(std::min(n, c * per))));
  at::parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      float* buf = c == 0 ? dst : copies.get() + (c - 1) * size;
      if (c > 0) std::fill(buf, buf + size, 0.f);
      add(bound[c], bound[c + 1], buf);
    }
  });
  if (chunks == 1) return;
  at::parallel_for(0, rows, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t c = 1; c < chunks; ++c)
      for (int64_t r = lo; r < hi; ++r) add_row(dst + r * width, copies.get() + (c - 1) * size + r * width, width);
  });
}

// chunked_scatter_add_in with as many chunks (up to 64) as keep the copies a small part of the work:
// `item_work` is one item's work in flops.
template <typename Align, typename Fn>
void chunked_scatter_add(int64_t n, int64_t item_work, int64_t rows, int64_t width, float* dst, Align align,
                         Fn add) {
  constexpr int64_t kMaxChunks = 64;
  const int64_t size = rows * width;
  const int64_t chunks =
      size == 0 ? 1 : std::max<int64_t>(1, std::min<int64_t>({kMaxChunks, n, n * item_work / (16 * size)}));
  chunked_scatter_add_in(chunks, n, rows, width, dst, align, add);
}

}  // namespace dlrmbench
