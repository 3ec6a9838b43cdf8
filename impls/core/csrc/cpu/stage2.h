// Stage 2 of the TT lookups of one prefix, forward and backward, shared by tt_last / tt_last_backward and
// the fused tt_stages / tt_stages_backward (so the separate and fused ops run the same kernels).
//   forward:  row_k = P (M x rk) G_last[j_k] (rk x qn); a 4-wide last core through stage2_kernels.h (P's rows in
//             the lanes with AVX-512, else two items per pass);
//   backward: dP (M x rk) = sum_k dE_k (M x qn) Gt[j_k] (qn x rk), one register-tiled GEMM over the items
//             (their columns and rows gathered by pointer), and dGt[j_k] (qn x rk) += dE_k^T P per item, into
//             the last core's gradient kept transposed (a full-width product), added back by add_transposed.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "stage2_kernels.h"
#include "tt_chain.h"

namespace dlrmbench {
inline namespace DLRMBENCH_ISA_NS {

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

// One call's forward stage 2: the shapes, and the last core transposed where the lanes kernels serve the shape
// (stage2_kernels.h: AVX-512, a 4-wide last core).
struct Stage2Forward {
  const CoreView& c;
  int L;
  int64_t M, N, K, D, wl;
  bool lanes;
  std::vector<float> Gt;
  Stage2Forward(const TTShape& s, const CoreView& cores)
      : c(cores), L(s.d - 1), M(s.Q(s.d - 2)), N(s.q[s.d - 1]), K(s.r[s.d - 1]), D(s.dim()),
        wl(s.core_width(s.d - 1)), lanes(gemm::lanes_fit(M, N, K)),
        Gt(lanes ? transposed_last_core(s, cores) : std::vector<float>()) {}
};

// One thread's forward stage-2 scratch: a prefix in lanes, a transposed slice.
struct Stage2Scratch {
  std::vector<float> X, tmp;
  explicit Stage2Scratch(const Stage2Forward& f) : X(f.lanes ? f.M * f.K : 0), tmp(f.K * f.N) {}
};

// Items [k0, k1) of one prefix P; item(k) is the output row's index, last[item] its last digit.
template <typename ItemAt>
inline void stage2_items(const Stage2Forward& f, const float* P, int64_t k0, int64_t k1, ItemAt item,
                         const int64_t* last, float* out, Stage2Scratch& w) {
  if (k0 == k1) return;
  const int64_t M = f.M, N = f.N, K = f.K, D = f.D;
  int64_t k = k0;
#if defined(DLRMBENCH_AVX512)
  if (f.lanes) {
    gemm::prefix_lanes(M, K, P, w.X.data());
    const float* Gt = f.Gt.data();
    for (; k + 1 < k1; k += 2) {
      const int64_t i0 = item(k), i1 = item(k + 1);
      gemm::lanes_item_pair(M, K, w.X.data(), Gt + last[i0] * f.wl, Gt + last[i1] * f.wl, out + i0 * D, out + i1 * D);
    }
    if (k < k1) {
      const int64_t i0 = item(k);
      gemm::lanes_item(M, K, w.X.data(), Gt + last[i0] * f.wl, out + i0 * D);
    }
    return;
  }
#endif
  if (N == 4) {
    for (; k + 1 < k1; k += 2) {
      const int64_t i0 = item(k), i1 = item(k + 1);
      gemm::n4_pair(M, K, P, f.c.row(f.L, last[i0]), f.c.row(f.L, last[i1]), out + i0 * D, out + i1 * D);
    }
    if (k < k1) {
      const int64_t i0 = item(k++);
      gemm::n4_pair(M, K, P, f.c.row(f.L, last[i0]), nullptr, out + i0 * D, nullptr);
    }
  }
  for (; k < k1; ++k) {
    const int64_t i = item(k);
    gemm::nn(M, N, K, P, f.c.row(f.L, last[i]), out + i * D, false, w.tmp.data());
  }
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

// A prefix of at most this many items runs its stage-2 backward item by item (gemm::item4_backward).
constexpr int64_t kFewItems = 2;

// The n items of one prefix P, item k's gradient row dE + k * D and last digit last[k]: dP overwritten (zero without
// items), dGt accumulated.
inline void stage2_items_backward(const TTShape& s, const float* Gt, const float* P, const float* dE,
                                  const int64_t* last, int64_t n, float* dP, float* dGt, Stage2Rows& w) {
  const int L = s.d - 1;
  const int64_t M = s.Q(L - 1), qn = s.q[L], rk = s.r[L], wl = s.core_width(L), D = s.dim();
  if (n == 0) std::fill(dP, dP + M * rk, 0.f);
#if defined(DLRMBENCH_AVX512)
  if (qn == 4 && rk % 16 == 0 && M % 8 == 0) {  // dP in registers over the items, both products in one pass
    gemm::items4_backward_lanes(M, rk, n, dE, D, Gt, last, wl, P, dP, dGt);
    return;
  }
#endif
  if (qn == 4 && rk % 8 == 0 && n <= kFewItems) {  // item by item, both products in one pass
    for (int64_t k = 0; k < n; ++k)
      gemm::item4_backward(M, rk, dE + k * D, Gt + last[k] * wl, P, dP, k > 0, dGt + last[k] * wl);
    return;
  }
  for (int64_t b0 = 0; b0 < n; b0 += kStack) {
    const int64_t b1 = std::min(n, b0 + kStack);
    for (int64_t k = b0; k < b1; ++k)
      for (int64_t v = 0; v < qn; ++v) {
        w.cols[(k - b0) * qn + v] = dE + k * D + v;
        w.brows[(k - b0) * qn + v] = Gt + last[k] * wl + v * rk;
      }
    gemm::nn_view(M, rk, (b1 - b0) * qn, gemm::ColsA{w.cols.data(), 0, qn}, gemm::RowsB{w.brows.data()},
                  gemm::StridedC{dP, rk}, b0 > 0);
  }
  for (int64_t k = 0; k < n; ++k) {
    if (qn == 4)
      gemm::t4_acc(M, rk, dE + k * D, P, dGt + last[k] * wl);
    else
      gemm::nn_strided(qn, rk, M, dE + k * D, 1, qn, P, rk, dGt + last[k] * wl, rk, true);
  }
}

}  // namespace DLRMBENCH_ISA_NS
}  // namespace dlrmbench
