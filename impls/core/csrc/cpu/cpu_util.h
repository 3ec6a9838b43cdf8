// Host helpers for the CPU kernels: index range checks and striped row locks for scatter-adds.
#pragma once

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace dlrmbench {

// Raise ValueError naming the op, the index tensor and the first entry outside [0, limit).
inline void check_range(const char* op, const char* name, const int64_t* v, int64_t n, int64_t limit) {
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(v[i] >= 0 && v[i] < limit, op, ": ", name, "[", i, "] = ", v[i], " is outside [0, ", limit,
                      ")");
  }
}

// Spin locks striped over row ids: a thread adding into row x of a shared buffer holds stripe x mod S.
// The CPU counterpart of the GPU kernels' atomicAdd into core gradients (same nondeterministic order).
class RowLocks {
 public:
  explicit RowLocks(int64_t rows) : n_(rows < kMax ? (rows > 0 ? rows : 1) : kMax), f_(new std::atomic_flag[n_]) {
    for (int64_t i = 0; i < n_; ++i) f_[i].clear();
  }
  void lock(int64_t row) {
    auto& f = f_[row % n_];
    while (f.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock(int64_t row) { f_[row % n_].clear(std::memory_order_release); }

 private:
  static constexpr int64_t kMax = 4096;
  int64_t n_;
  std::unique_ptr<std::atomic_flag[]> f_;
};

}  // namespace dlrmbench
