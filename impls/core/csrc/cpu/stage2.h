// Stage 2 of the TT lookups of one prefix, forward and backward, shared by tt_last / tt_last_backward and
// the fused tt_stages / tt_stages_backward (so the separate and fused ops run the same kernels).
//   forward:  row_k = P (M x rk) G_last[j_k] (rk x qn), two items per pass when the last core is 4 wide;
//   backward: dP (M x rk) = sum_k dE_k (M x qn) Gt[j_k] (qn x rk), one register-tiled GEMM over the items
//             (their columns and rows gathered by pointer), and dGt[j_k] (qn x rk) += dE_k^T P per item, into
//             the last core's gradient kept transposed (a full-width product), added back by add_transposed.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tt_chain.h"

namespace dlrmbench {

// Items [k0, k1) of one prefix P; item(k) is the output row's index, last[item] its last digit.
template <typename ItemAt>
inline void stage2_items(const TTShape& s, const CoreView& c, const float* P, int64_t k0, int64_t k1, ItemAt item,
                         const int64_t* last, float* out, float* tmp) {
  const int L = s.d - 1;
  const int64_t M = s.Q(L - 1), N = s.q[L], K = s.r[L], D = s.dim();
  int64_t k = k0;
  if (N == 4) {
    for (; k + 1 < k1; k += 2) {
      const int64_t i0 = item(k), i1 = item(k + 1);
      gemm::n4_pair(M, K, P, c.row(L, last[i0]), c.row(L, last[i1]), out + i0 * D, out + i1 * D);
    }
    if (k < k1) {
      const int64_t i0 = item(k++);
      gemm::n4_pair(M, K, P, c.row(L, last[i0]), nullptr, out + i0 * D, nullptr);
    }
  }
  for (; k < k1; ++k) {
    const int64_t i = item(k);
    gemm::nn(M, N, K, P, c.row(L, last[i]), out + i * D, false, tmp);
  }
}

// The last core with each slice transposed to (qn x rk).
inline std::vector<float> transposed_last_core(const TTShape& s, const CoreView& c) {
  const int L = s.d - 1;
  const int64_t rk = s.r[L], qn = s.q[L], wl = s.core_width(L);
  std::vector<float> Gt(s.p[L] * wl);
  at::parallel_for(0, s.p[L], 64, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) gemm::transpose(rk, qn, c.row(L, j), Gt.data() + j * wl);
  });
  return Gt;
}

// dG_last (p x rk*qn) += the transposed gradient dGt (p x qn*rk).
inline void add_transposed(const TTShape& s, const float* dGt, float* dG) {
  const int L = s.d - 1;
  const int64_t rk = s.r[L], qn = s.q[L], wl = s.core_width(L);
  at::parallel_for(0, s.p[L], 64, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j)
      for (int64_t a = 0; a < rk; ++a)
        for (int64_t b = 0; b < qn; ++b) dG[j * wl + a * qn + b] += dGt[j * wl + b * rk + a];
  });
}

// One thread's operand pointers for the backward GEMM over a prefix's items (kStack items at a time).
struct Stage2Rows {
  std::vector<const float*> cols, brows;
  explicit Stage2Rows(const TTShape& s) : cols(kStack * s.q[s.d - 1]), brows(cols.size()) {}
};

// Items [k0, k1) of one prefix P (rows dE + k * D): dP overwritten (zero without items), dGt accumulated.
inline void stage2_items_backward(const TTShape& s, const float* Gt, const float* P, const float* dE,
                                  const int64_t* last, int64_t k0, int64_t k1, float* dP, float* dGt, Stage2Rows& w) {
  const int L = s.d - 1;
  const int64_t M = s.Q(L - 1), qn = s.q[L], rk = s.r[L], wl = s.core_width(L), D = s.dim();
  if (k0 == k1) std::fill(dP, dP + M * rk, 0.f);
  for (int64_t b0 = k0; b0 < k1; b0 += kStack) {
    const int64_t b1 = std::min(k1, b0 + kStack);
    for (int64_t k = b0; k < b1; ++k)
      for (int64_t v = 0; v < qn; ++v) {
        w.cols[(k - b0) * qn + v] = dE + k * D + v;
        w.brows[(k - b0) * qn + v] = Gt + last[k] * wl + v * rk;
      }
    gemm::nn_view(M, rk, (b1 - b0) * qn, gemm::ColsA{w.cols.data(), 0, qn}, gemm::RowsB{w.brows.data()},
                  gemm::StridedC{dP, rk}, b0 > k0);
  }
  for (int64_t k = k0; k < k1; ++k) {
    if (qn == 4)
      gemm::t4_acc(M, rk, dE + k * D, P, dGt + last[k] * wl);
    else
      gemm::nn_strided(qn, rk, M, dE + k * D, 1, qn, P, rk, dGt + last[k] * wl, rk, true);
  }
}

}  // namespace dlrmbench
