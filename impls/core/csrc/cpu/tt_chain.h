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
inline namespace DLRMBENCH_ISA_NS {

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


// Every prefix id's d-1 digits (first most significant), decoded once per call: an op reads them several times
// per prefix (the order, its runs, the stage-1 operands, the gradient rows), and a 64-bit division per read is a
// visible share of a prefix's stage-1 work.
struct PrefixDigits {
  int n;
  std::vector<int64_t> d;
  PrefixDigits(const TTShape& s, const int64_t* ids, int64_t G) : n(s.d - 1), d(G * (s.d - 1)) {
    at::parallel_for(0, G, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t x = lo; x < hi; ++x) s.prefix_digits(ids[x], d.data() + x * n);
    });
  }
  const int64_t* of(int64_t x) const { return d.data() + x * n; }
  int64_t last(int64_t x) const { return d[x * n + n - 1]; }
};

// Prefix ids ordered by their last digit (the B operand of the last chain step), stably.
// Kernels walk this order in runs that share that core slice, so it stays in cache and a run's products
// stack into one taller GEMM (each product is still computed exactly once).
inline std::vector<int64_t> order_by_last_prefix_digit(const TTShape& s, const PrefixDigits& pd, int64_t G) {
  return order_by_key(G, s.p[s.d - 2], [&](int64_t i) { return pd.last(i); });
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

// Segment starts of a non-decreasing group map: items of group g are [start[g], start[g+1]).
inline std::vector<int64_t> group_starts(const char* op, const int64_t* grp, int64_t n, int64_t groups) {
  std::vector<int64_t> start(groups + 1, n);
  int64_t prev = -1;
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(grp[i] >= prev, op, ": item_group must be non-decreasing (items of a group contiguous); "
                      "item_group[", i, "] = ", grp[i], " follows ", prev);
    TORCH_CHECK_VALUE(grp[i] >= 0 && grp[i] < groups, op, ": item_group[", i, "] = ", grp[i], " is outside [0, ", groups, ")");
    for (int64_t g = prev + 1; g <= grp[i]; ++g) start[g] = i;
    prev = grp[i];
  }
  return start;
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

// Stage 1 over one stack of prefixes sharing the last prefix digit j (order[i..e), at most kStack): P for
// prefix id ids[order[b]] written to dst(b), as one tall GEMM P_{d-2} = [P_{d-3}; ..] G_{d-2}[j] (P_{d-3} read in
// place when it is core 0's slice, else recomputed per prefix). d = 2: the prefix is core 0's slice, copied.
struct PrefixStack {
  const TTShape& s;
  const CoreView& c;
  ChainScratch w;
  std::vector<float> inner;
  std::vector<const float*> arows;
  std::vector<float*> crows;
  PrefixStack(const TTShape& shape, const CoreView& cores)
      : s(shape), c(cores), w(shape), inner(shape.d > 3 ? kStack * shape.Q(shape.d - 3) * shape.r[shape.d - 2] : 0),
        arows(kStack * (shape.d > 2 ? shape.Q(shape.d - 3) : 1)), crows(arows.size()) {}

  template <typename Dst>
  void run(const PrefixDigits& pd, const int64_t* order, int64_t i, int64_t e, int64_t j, Dst dst) {
    if (s.d == 2) {
      for (int64_t b = i; b < e; ++b)
        std::memcpy(dst(b), c.row(0, pd.of(order[b])[0]), sizeof(float) * s.prefix_width());
      return;
    }
    const int t = s.d - 2;
    const int64_t Mi = s.Q(t - 1), K = s.r[t], N = s.q[t] * s.r[t + 1];
    for (int64_t b = i; b < e; ++b) {
      const int64_t* digits = pd.of(order[b]);
      const float* a = c.row(0, digits[0]);  // d = 3: P_0 is core 0's slice, read in place
      if (s.d > 3) {
        float* slot = inner.data() + (b - i) * Mi * K;
        prefix_chain(s, c, digits, t - 1, w, slot);
        a = slot;
      }
      float* out = dst(b);
      for (int64_t m = 0; m < Mi; ++m) {
        arows[(b - i) * Mi + m] = a + m * K;
        crows[(b - i) * Mi + m] = out + m * N;
      }
    }
    gemm::nn_view((e - i) * Mi, N, K, gemm::RowsA{arows.data()}, gemm::StridedB{c.row(t, j), N},
                  gemm::RowsC{crows.data()}, false);
  }
};

// One stacked chain step over nb prefixes sharing digit j of core t, whose operands `rows` holds (rows of
// P_{t-1}, rows of dP_t): dG_t[j] (K x N) += [P_{t-1}; ..]^T [dP_t; ..] and dP_{t-1} = dP_t G_t[j]^T, the nb
// (M x K) results one after another in `out`. With `slice_t` (G_t[j] transposed, N x K) the second product
// runs register-tiled along K instead of as dot products along N (worth its transpose for a long run).
constexpr int64_t kLongRun = 8;  // stacks of at least this many prefixes pay for transposing G_t[j] (slice_t)

inline void stacked_step(const TTShape& s, const CoreView& c, int t, int64_t j, int64_t nb, const StackRows& rows,
                         float* dGt, float* out, const float* slice_t = nullptr) {
  const int64_t M = rows.M, K = s.r[t], N = s.q[t] * s.r[t + 1];
  gemm::nn_view(K, N, nb * M, gemm::ColsA{rows.a.data(), 0}, gemm::RowsB{rows.b.data()},
                gemm::StridedC{dGt + j * s.core_width(t), N}, true);
  if (slice_t) {
    gemm::nn_view(nb * M, K, N, gemm::RowsA{rows.b.data()}, gemm::StridedB{slice_t, K}, gemm::StridedC{out, K}, false);
    return;
  }
  gemm::nt_dot_view(nb * M, K, N, [&](int64_t m) { return rows.b[m]; }, c.row(t, j), N, gemm::StridedC{out, K},
                    false);
}

}  // namespace DLRMBENCH_ISA_NS
}  // namespace dlrmbench
