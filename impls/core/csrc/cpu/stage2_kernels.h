// The micro-kernels of stage 2 (an item's row = its prefix P (M x K) times the last core's slice (K x q_last)) for a
// last core 4 wide, the common case (q_last = 4), where a product vectorized along q_last leaves most lanes idle.
//   AVX-512, forward (lanes_*): P's rows in the lanes. P is rearranged once per prefix so that vector h holds
//     rows m = 0..7 at columns 2h and 2h+1 (lane 2m + e = P[m][2h + e]); an item is then K/2 full-width FMAs per
//     output column v, each against one 64-bit broadcast of the pair (Gt[v][2h], Gt[v][2h+1]) of the slice
//     transposed, a load. No lane idles whatever the number of items per prefix, and nothing is broadcast from
//     P. The two column parities are added and the rows put back in FBTT order at the store.
//   AVX2 (and AVX-512 where the shape does not fit the lanes), forward (n4_pair): two items of one prefix side
//     by side in 8-float vectors, P's entries broadcast.
//   Backward (t4_acc): the last-core gradient of one item, dGt (4 x N) += dE^T (4 x M) P (M x N), along N;
//     (item4_backward) both backward products of one item in one pass over P's rows, for prefixes of few items.
#pragma once

#include <cstdint>
#include <cstring>

#include "small_gemm.h"

namespace dlrmbench {
inline namespace DLRMBENCH_ISA_NS {
namespace gemm {

#if defined(DLRMBENCH_AVX512)
// Whether lanes_* serve a prefix of M x K rows times a K x N slice.
inline bool lanes_fit(int64_t M, int64_t N, int64_t K) { return N == 4 && M % 8 == 0 && K % 16 == 0 && K > 0; }

// t = r^T for an 8 x 8 matrix of 64-bit elements (pairs of floats), one row per register.
inline void transpose8x8_pairs(const __m512d r[8], __m512d t[8]) {
  __m512d a[8], b[8];
  for (int i = 0; i < 4; ++i) {  // a[2i] lane L: (r[2i], r[2i+1]) at 2L; a[2i+1]: at 2L+1
    a[2 * i] = _mm512_mask_unpacklo_pd(r[2 * i], 0xFF, r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_mask_unpackhi_pd(r[2 * i], 0xFF, r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 4h..4h+3: b[4h + c] holds columns c and c + 4
    b[4 * h + 0] = _mm512_mask_shuffle_f64x2(a[4 * h + 0], 0xFF, a[4 * h + 0], a[4 * h + 2], 0x88);
    b[4 * h + 1] = _mm512_mask_shuffle_f64x2(a[4 * h + 1], 0xFF, a[4 * h + 1], a[4 * h + 3], 0x88);
    b[4 * h + 2] = _mm512_mask_shuffle_f64x2(a[4 * h + 0], 0xFF, a[4 * h + 0], a[4 * h + 2], 0xDD);
    b[4 * h + 3] = _mm512_mask_shuffle_f64x2(a[4 * h + 1], 0xFF, a[4 * h + 1], a[4 * h + 3], 0xDD);
  }
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm512_mask_shuffle_f64x2(b[c], 0xFF, b[c], b[4 + c], 0x88);
    t[c + 4] = _mm512_mask_shuffle_f64x2(b[c], 0xFF, b[c], b[4 + c], 0xDD);
  }
}

// X = P (M x K, row-major) with its rows in the lanes: per block of 8 rows, K/2 vectors of 16 floats, vector h's
// lane 2m + e = P[m][2h + e]. lanes_fit(M, 4, K).
inline void prefix_lanes(int64_t M, int64_t K, const float* P, float* X) {
  for (int64_t m0 = 0; m0 < M; m0 += 8) {
    const float* p = P + m0 * K;
    float* x = X + m0 * K;
    for (int64_t h0 = 0; h0 < K / 2; h0 += 8) {
      __m512d r[8], t[8];
      for (int m = 0; m < 8; ++m) r[m] = _mm512_loadu_pd(reinterpret_cast<const double*>(p + m * K + 2 * h0));
      transpose8x8_pairs(r, t);
      for (int c = 0; c < 8; ++c) _mm512_storeu_pd(reinterpret_cast<double*>(x + (h0 + c) * 16), t[c]);
    }
  }
}

inline __m512 bcast_pair(const float* p) {
  double d;
  std::memcpy(&d, p, sizeof d);
  return _mm512_castpd_ps(_mm512_set1_pd(d));
}

// Rows 0..7 (4 floats each, FBTT order) from s[v], whose lane 2m + e holds row m's column v summed over the K
// columns of parity e.
inline void store_lanes(const __m512 s[4], float* c) {
  __m512 sw[4];  // adjacent lanes swapped
  for (int v = 0; v < 4; ++v) sw[v] = _mm512_mask_permute_ps(s[v], 0xFFFF, s[v], 0xB1);
  // lane 2m: row m's column 0 (2), lane 2m + 1: column 1 (3)
  const __m512d w01 = _mm512_castps_pd(
      _mm512_add_ps(_mm512_mask_blend_ps(0xAAAA, s[0], s[1]), _mm512_mask_blend_ps(0xAAAA, sw[0], sw[1])));
  const __m512d w23 = _mm512_castps_pd(
      _mm512_add_ps(_mm512_mask_blend_ps(0xAAAA, s[2], s[3]), _mm512_mask_blend_ps(0xAAAA, sw[2], sw[3])));
  const __m512d lo = _mm512_mask_unpacklo_pd(w01, 0xFF, w01, w23);  // 128-bit lane L: row 2L
  const __m512d hi = _mm512_mask_unpackhi_pd(w01, 0xFF, w01, w23);  // row 2L + 1
  const __m512i rows0123 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i rows4567 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  _mm512_storeu_pd(reinterpret_cast<double*>(c), _mm512_permutex2var_pd(lo, rows0123, hi));
  _mm512_storeu_pd(reinterpret_cast<double*>(c + 16), _mm512_permutex2var_pd(lo, rows4567, hi));
}

// One item: C (M x 4) = P G for X = prefix_lanes(P) and Gt = G^T (4 x K, row-major).
inline void lanes_item(int64_t M, int64_t K, const float* X, const float* Gt, float* C) {
  for (int64_t m0 = 0; m0 < M; m0 += 8) {
    const float* x = X + m0 * K;
    __m512 e[4], o[4];  // even and odd h: eight independent chains
    for (int v = 0; v < 4; ++v) e[v] = o[v] = _mm512_setzero_ps();
    for (int64_t h = 0; h < K / 2; h += 2) {
      const __m512 x0 = _mm512_loadu_ps(x + h * 16), x1 = _mm512_loadu_ps(x + h * 16 + 16);
      for (int v = 0; v < 4; ++v) {
        e[v] = _mm512_fmadd_ps(bcast_pair(Gt + v * K + 2 * h), x0, e[v]);
        o[v] = _mm512_fmadd_ps(bcast_pair(Gt + v * K + 2 * h + 2), x1, o[v]);
      }
    }
    for (int v = 0; v < 4; ++v) e[v] = _mm512_add_ps(e[v], o[v]);
    store_lanes(e, C + m0 * 4);
  }
}

// Two items of one prefix: C0 = P G0, C1 = P G1 (each X vector loaded once for both).
inline void lanes_item_pair(int64_t M, int64_t K, const float* X, const float* Gt0, const float* Gt1, float* C0,
                            float* C1) {
  for (int64_t m0 = 0; m0 < M; m0 += 8) {
    const float* x = X + m0 * K;
    __m512 a[4], b[4];
    for (int v = 0; v < 4; ++v) a[v] = b[v] = _mm512_setzero_ps();
    for (int64_t h = 0; h < K / 2; ++h) {
      const __m512 xv = _mm512_loadu_ps(x + h * 16);
      for (int v = 0; v < 4; ++v) {
        a[v] = _mm512_fmadd_ps(bcast_pair(Gt0 + v * K + 2 * h), xv, a[v]);
        b[v] = _mm512_fmadd_ps(bcast_pair(Gt1 + v * K + 2 * h), xv, b[v]);
      }
    }
    store_lanes(a, C0 + m0 * 4);
    store_lanes(b, C1 + m0 * 4);
  }
}

// The stage-2 backward of all n items of one prefix P (M x N, M % 8 == 0, N % 16 == 0) for a last core 4 wide, in
// 16-float column blocks: for 8 rows and 16 columns, dP's block stays in registers over every item (dP = sum_k dE_k
// Gt_k, overwritten), while item k's block of dGt_k (+)= dE_k^T P is loaded, accumulated over the 8 rows and stored.
// Item k: its gradient dE + k * ldE (M x 4, row-major), its slice of the transposed last core Gt + last[k] * wl
// (4 x N) and of its gradient dGt + last[k] * wl. Each item is 2 x 8 x 4 16-float FMAs per block, its entries of dE
// broadcast from memory; per element, the same sums in the same order as the GEMM over the items and t4_acc.
inline void items4_backward_lanes(int64_t M, int64_t N, int64_t n, const float* dE, int64_t ldE, const float* Gt,
                                  const int64_t* last, int64_t wl, const float* P, float* dP, float* dGt) {
  for (int64_t m0 = 0; m0 < M; m0 += 8) {
    for (int64_t c = 0; c < N; c += 16) {
      __m512 acc[8];
      for (int m = 0; m < 8; ++m) acc[m] = _mm512_setzero_ps();
      for (int64_t k = 0; k < n; ++k) {
        const float* e = dE + k * ldE + m0 * 4;
        const float* gt = Gt + last[k] * wl + c;
        float* dg = dGt + last[k] * wl + c;
        __m512 G[4], g[4];
        for (int v = 0; v < 4; ++v) {
          G[v] = _mm512_loadu_ps(gt + v * N);
          g[v] = _mm512_loadu_ps(dg + v * N);
        }
        for (int m = 0; m < 8; ++m) {
          const __m512 p = _mm512_loadu_ps(P + (m0 + m) * N + c);
          for (int v = 0; v < 4; ++v) {
            const __m512 ev = _mm512_set1_ps(e[m * 4 + v]);
            acc[m] = _mm512_fmadd_ps(ev, G[v], acc[m]);
            g[v] = _mm512_fmadd_ps(ev, p, g[v]);
          }
        }
        for (int v = 0; v < 4; ++v) _mm512_storeu_ps(dg + v * N, g[v]);
      }
      for (int m = 0; m < 8; ++m) _mm512_storeu_ps(dP + (m0 + m) * N + c, acc[m]);
    }
  }
}
#else
inline bool lanes_fit(int64_t, int64_t, int64_t) { return false; }
#endif

// One item's stage-2 backward for a last core 4 wide, both products in one pass over the rows of P (M x N):
// dP (M x N) (+)= dE (M x 4) Gt (4 x N) and dGt (4 x N) += dE^T P, in 8-float vectors along N (N % 8 == 0): each
// row of dE broadcast once, dGt held in registers over the rows. For an item alone on its prefix, where a GEMM
// over the prefix's items (K = 4 per item) spends more on its tiles' edges than on its FMAs.
template <int NV>
inline void item4_backward_cols(int64_t M, int64_t N, const float* dE, const float* Gt, const float* P, float* dP,
                                bool accumulate, float* dGt, int64_t n) {
  V8 g[4][NV];
  for (int v = 0; v < 4; ++v)
    for (int t = 0; t < NV; ++t) g[v][t] = load(dGt + v * N + n + 8 * t, V8{});
  for (int64_t m = 0; m < M; ++m) {
    V8 e[4];
    for (int v = 0; v < 4; ++v) e[v] = bcast(dE[m * 4 + v], V8{});
    for (int t = 0; t < NV; ++t) {
      const int64_t at = m * N + n + 8 * t;
      V8 d = accumulate ? load(dP + at, V8{}) : bcast(0.f, V8{});
      for (int v = 0; v < 4; ++v) d = fma(e[v], load(Gt + v * N + n + 8 * t, V8{}), d);
      store(dP + at, d);
      const V8 p = load(P + at, V8{});
      for (int v = 0; v < 4; ++v) g[v][t] = fma(e[v], p, g[v][t]);
    }
  }
  for (int v = 0; v < 4; ++v)
    for (int t = 0; t < NV; ++t) store(dGt + v * N + n + 8 * t, g[v][t]);
}

inline void item4_backward(int64_t M, int64_t N, const float* dE, const float* Gt, const float* P, float* dP,
                           bool accumulate, float* dGt) {
  int64_t n = 0;
  for (; n + 16 <= N; n += 16) item4_backward_cols<2>(M, N, dE, Gt, P, dP, accumulate, dGt, n);
  if (n < N) item4_backward_cols<1>(M, N, dE, Gt, P, dP, accumulate, dGt, n);
}

#if defined(DLRMBENCH_AVX512) || defined(DLRMBENCH_AVX2)
template <int MR>
inline void n4_rows(int64_t K, const float* A, const float* B0, const float* B1, float* C0, float* C1) {
  __m256 c[MR];
  for (int m = 0; m < MR; ++m) c[m] = _mm256_setzero_ps();
  const float* b1 = B1 ? B1 : B0;
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b =
        _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(B0 + 4 * k)), _mm_loadu_ps(b1 + 4 * k), 1);
    for (int m = 0; m < MR; ++m) c[m] = _mm256_fmadd_ps(_mm256_broadcast_ss(A + m * K + k), b, c[m]);
  }
  for (int m = 0; m < MR; ++m) {
    _mm_storeu_ps(C0 + 4 * m, _mm256_castps256_ps128(c[m]));
    if (C1) _mm_storeu_ps(C1 + 4 * m, _mm256_extractf128_ps(c[m], 1));
  }
}

// C0[M x 4] = A[M x K] B0[K x 4] and C1 = A B1 (C1 may be null: one item, half the lanes idle). All row-major and
// contiguous; no call into the generic tiles (a per-item call and its register spills cost more than this).
inline void n4_pair(int64_t M, int64_t K, const float* A, const float* B0, const float* B1, float* C0, float* C1) {
  int64_t m = 0;
  for (; m + 8 <= M; m += 8) n4_rows<8>(K, A + m * K, B0, B1, C0 + 4 * m, C1 ? C1 + 4 * m : nullptr);
  for (; m + 2 <= M; m += 2) n4_rows<2>(K, A + m * K, B0, B1, C0 + 4 * m, C1 ? C1 + 4 * m : nullptr);
  if (m < M) n4_rows<1>(K, A + m * K, B0, B1, C0 + 4 * m, C1 ? C1 + 4 * m : nullptr);
}

// C[4 x N] += A^T B for A[M x 4] and B[M x N], row-major, columns [n, n + NV vectors).
template <typename V, int NV>
inline void t4_acc_cols(int64_t M, const float* A, const float* B, int64_t N, float* C, int64_t n) {
  constexpr int W = V::width;
  V c[4][NV];
  for (int v = 0; v < 4; ++v)
    for (int t = 0; t < NV; ++t) c[v][t] = load(C + v * N + n + W * t, V{});
  for (int64_t m = 0; m < M; ++m) {
    V b[NV];
    for (int t = 0; t < NV; ++t) b[t] = load(B + m * N + n + W * t, V{});
    for (int v = 0; v < 4; ++v) {
      const V a = bcast(A[m * 4 + v], V{});
      for (int t = 0; t < NV; ++t) c[v][t] = fma(a, b[t], c[v][t]);
    }
  }
  for (int v = 0; v < 4; ++v)
    for (int t = 0; t < NV; ++t) store(C + v * N + n + W * t, c[v][t]);
}

inline void t4_acc(int64_t M, int64_t N, const float* A, const float* B, float* C) {
  constexpr int W = VW::width;
  int64_t n = 0;
  for (; n + 2 * W <= N; n += 2 * W) t4_acc_cols<VW, 2>(M, A, B, N, C, n);
  for (; n + W <= N; n += W) t4_acc_cols<VW, 1>(M, A, B, N, C, n);
  for (; n + 8 <= N; n += 8) t4_acc_cols<V8, 1>(M, A, B, N, C, n);
  if (n < N) nn_strided(4, N - n, M, A, 1, 4, B + n, N, C + n, N, true);
}
#else
inline void n4_pair(int64_t M, int64_t K, const float* A, const float* B0, const float* B1, float* C0, float* C1) {
  nn_strided(M, 4, K, A, K, 1, B0, 4, C0, 4, false);
  if (C1) nn_strided(M, 4, K, A, K, 1, B1, 4, C1, 4, false);
}

inline void t4_acc(int64_t M, int64_t N, const float* A, const float* B, float* C) {
  nn_strided(4, N, M, A, 1, 4, B, N, C, N, true);
}
#endif

}  // namespace gemm
}  // namespace DLRMBENCH_ISA_NS
}  // namespace dlrmbench
