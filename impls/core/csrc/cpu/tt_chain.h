// The per-lookup TT chain on the CPU: prefix products of the first d-1 cores (forward) and the walk
// back through them (backward), written once over the shared micro-kernels for every TT op.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "../tt_args.h"
#include "cpu_util.h"
#include "small_gemm.h"

namespace dlrmbench {

struct CoreView {
  const float* data[4];
  int64_t width[4];
  const float* row(int k, int64_t i) const { return data[k] + i * width[k]; }
};

inline CoreView core_view(const TTShape& s, at::TensorList cores) {
  CoreView v{};
  for (int k = 0; k < s.d; ++k) {
    v.data[k] = cores[k].data_ptr<float>();
    v.width[k] = s.core_width(k);
  }
  return v;
}

// Thread-local working memory for one chain: P_0..P_{d-2} and a transpose buffer.
struct ChainScratch {
  std::vector<float> buf;
  const float* P[4] = {nullptr, nullptr, nullptr, nullptr};  // this chain's P_t (core 0's slice for t = 0)
  float* own[4] = {nullptr, nullptr, nullptr, nullptr};      // scratch for P_t, t >= 1
  float* tmp = nullptr;
  explicit ChainScratch(const TTShape& s) {
    int64_t total = 0, tmp_need = 0;
    int64_t off[4] = {0, 0, 0, 0};
    for (int t = 0; t < s.d - 1; ++t) {
      off[t] = total;
      total += s.Q(t) * s.r[t + 1];
    }
    for (int k = 0; k < s.d; ++k) tmp_need = std::max(tmp_need, s.core_width(k));
    tmp_need = std::max(tmp_need, s.prefix_width());
    buf.resize(total + tmp_need);
    for (int t = 0; t < s.d - 1; ++t) own[t] = buf.data() + off[t];
    tmp = buf.data() + total;
  }
};

// P_t for t = 0..upto (P_0 is core 0's slice); P_t = P_{t-1} (Q_{t-1} x r_t) * G_t[i_t] (r_t x q_t r_{t+1}).
// The last one computed is written to `out` when given.
inline void prefix_chain(const TTShape& s, const CoreView& c, const int64_t* digits, int upto, ChainScratch& w,
                         float* out) {
  const float* prev = c.row(0, digits[0]);
  w.P[0] = prev;
  if (upto == 0) {
    if (out) std::memcpy(out, prev, sizeof(float) * s.q[0] * s.r[1]);
    return;
  }
  for (int t = 1; t <= upto; ++t) {
    float* dst = (t == upto && out) ? out : w.own[t];
    gemm::nn(s.Q(t - 1), s.q[t] * s.r[t + 1], s.r[t], prev, c.row(t, digits[t]), dst, false, w.tmp);
    w.P[t] = dst;
    prev = dst;
  }
}


// Prefix ids ordered by their last digit (the B operand of the last chain step), stably.
// Kernels walk this order in runs that share that core slice, so it stays in cache and a run's products
// stack into one taller GEMM (each product is still computed exactly once).
inline std::vector<int64_t> order_by_last_prefix_digit(const TTShape& s, const int64_t* ids, int64_t G) {
  const int64_t radix = s.p[s.d - 2];
  return order_by_key(G, radix, [&](int64_t i) { return ids[i] % radix; });
}

// Items ordered by group (identity when already non-decreasing), stably.
inline std::vector<int64_t> order_by_group(const int64_t* grp, int64_t n, int64_t groups) {
  bool sorted = true;
  for (int64_t i = 1; i < n && sorted; ++i) sorted = grp[i] >= grp[i - 1];
  if (!sorted) return order_by_key(n, groups, [&](int64_t i) { return grp[i]; });
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

// Most prefixes (or items) stacked into one GEMM of a run.
constexpr int64_t kStack = 64;

// Row pointers of up to kStack pairs of (M x *) matrices stacked along M: the operands of one tall GEMM
// C += [A_1; A_2; ..]^T [B_1; B_2; ..] (gemm::ColsA over `a`, gemm::RowsB over `b`).
struct StackRows {
  int64_t M;
  std::vector<const float*> a, b;
  explicit StackRows(int64_t rows) : M(rows), a(kStack * rows), b(kStack * rows) {}
  void set(int64_t slot, const float* A, int64_t lda, const float* B, int64_t ldb) {
    for (int64_t m = 0; m < M; ++m) {
      a[slot * M + m] = A + m * lda;
      b[slot * M + m] = B + m * ldb;
    }
  }
};

// Walk order[lo:hi) in runs of at most kStack entries sharing key(); fn(i, e, key) per run [i, e).
template <typename Key, typename Fn>
inline void for_each_run(const std::vector<int64_t>& order, int64_t lo, int64_t hi, Key key, Fn fn) {
  for (int64_t i = lo; i < hi;) {
    const auto k = key(order[i]);
    int64_t e = i + 1;
    while (e < hi && e - i < kStack && key(order[e]) == k) ++e;
    fn(i, e, k);
    i = e;
  }
}

}  // namespace dlrmbench
