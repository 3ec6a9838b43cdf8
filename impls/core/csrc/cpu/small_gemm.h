// The small-GEMM micro-kernels every TT op shares (fp32, row-major). Register-tiled over the widest vectors the
// build targets (isa.h: 16 floats with AVX-512, 8 with AVX2 + FMA, plain loops otherwise), no allocation:
// callers pass scratch. Sizes are those of TT core slices: one dimension is often tiny (q_k = 2..8), so each
// entry point picks the orientation that keeps the long dimension in the vector lanes.
#pragma once

#include <cstdint>

#include "isa.h"

namespace dlrmbench {
inline namespace DLRMBENCH_ISA_NS {
namespace gemm {

// A W-float vector V over register type T and intrinsic prefix P (_mm, _mm256, _mm512): load, store, bcast, fma.
#define DLRMBENCH_VECTOR(V, T, W, P)                                                         \
  struct V {                                                                                 \
    T v;                                                                                     \
    static constexpr int width = W;                                                          \
  };                                                                                         \
  inline V load(const float* p, V) { return {P##_loadu_ps(p)}; }                            \
  inline void store(float* p, V x) { P##_storeu_ps(p, x.v); }                               \
  inline V bcast(float a, V) { return {P##_set1_ps(a)}; }                                   \
  inline V fma(V a, V b, V c) { return {P##_fmadd_ps(a.v, b.v, c.v)}; }

#if defined(DLRMBENCH_AVX512) || defined(DLRMBENCH_AVX2)
DLRMBENCH_VECTOR(V4, __m128, 4, _mm)
DLRMBENCH_VECTOR(V8, __m256, 8, _mm256)
inline float hsum(V8 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x.v), _mm256_extractf128_ps(x.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#else
template <int W>
struct VN {
  float v[W];
  static constexpr int width = W;
};
template <int W>
inline VN<W> load(const float* p, VN<W>) {
  VN<W> r;
  for (int i = 0; i < W; ++i) r.v[i] = p[i];
  return r;
}
template <int W>
inline void store(float* p, VN<W> x) {
  for (int i = 0; i < W; ++i) p[i] = x.v[i];
}
template <int W>
inline VN<W> bcast(float a, VN<W>) {
  VN<W> r;
  for (int i = 0; i < W; ++i) r.v[i] = a;
  return r;
}
template <int W>
inline VN<W> fma(VN<W> a, VN<W> b, VN<W> c) {
  for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i];
  return c;
}
template <int W>
inline float hsum(VN<W> x) {
  float t = 0.f;
  for (int i = 0; i < W; ++i) t += x.v[i];
  return t;
}
using V4 = VN<4>;
using V8 = VN<8>;
#endif

#if defined(DLRMBENCH_AVX512)
DLRMBENCH_VECTOR(V16, __m512, 16, _mm512)
// (Masked forms with a full mask, here and in stage2_kernels.h: the same instructions as the plain intrinsics,
// whose "undefined" pass-through operand GCC 12 reports as maybe-uninitialized.)
inline float hsum(V16 x) {
  const __m512d d = _mm512_castps_pd(x.v);
  const __m256 lo = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 1));
  return hsum(V8{_mm256_add_ps(lo, hi)});
}
using VW = V16;  // the widest vector of this build
#else
using VW = V8;
#endif

// Operand views. A: element (i, k); B: row k; C: row i. Strided views cover plain and transposed
// matrices; row-pointer views let a kernel read and write the rows of many small matrices in place (the
// slices and buffers of a run of TT lookups) without copying them into one stacked matrix.
struct StridedA {
  const float* p;
  int64_t rs, cs;
  float at(int64_t i, int64_t k) const { return p[i * rs + k * cs]; }
  StridedA from(int64_t i) const { return {p + i * rs, rs, cs}; }
};
struct RowsA {  // A(i, k) = rows[i][k]
  const float* const* rows;
  float at(int64_t i, int64_t k) const { return rows[i][k]; }
  RowsA from(int64_t i) const { return {rows + i}; }
};
struct ColsA {  // A(i, k) = cols[k][(off + i) * stride]: the transpose of a row-pointer matrix (stride 1), or
                // columns gathered from many small matrices
  const float* const* cols;
  int64_t off;
  int64_t stride = 1;
  float at(int64_t i, int64_t k) const { return cols[k][(off + i) * stride]; }
  ColsA from(int64_t i) const { return {cols, off + i, stride}; }
};
struct StridedB {
  const float* p;
  int64_t ld;
  const float* row(int64_t k) const { return p + k * ld; }
};
struct RowsB {
  const float* const* rows;
  const float* row(int64_t k) const { return rows[k]; }
};
struct StridedC {
  float* p;
  int64_t ld;
  float* row(int64_t i) const { return p + i * ld; }
  StridedC from(int64_t i) const { return {p + i * ld, ld}; }
};
struct RowsC {
  float* const* rows;
  float* row(int64_t i) const { return rows[i]; }
  RowsC from(int64_t i) const { return {rows + i}; }
};

// C[MR x W*NV] (+)= A[MR x K] * B[K x W*NV] at column n, in W-float vectors.
template <typename V, int MR, int NV, typename AT, typename BT, typename CT>
inline void tile(int64_t K, const AT& A, const BT& B, const CT& C, int64_t n, bool accumulate) {
  constexpr int W = V::width;
  V c[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) c[m][v] = accumulate ? load(C.row(m) + n + W * v, V{}) : bcast(0.f, V{});
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B.row(k) + n;
    V bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load(b + W * v, V{});
    for (int m = 0; m < MR; ++m) {
      const V a = bcast(A.at(m, k), V{});
      for (int v = 0; v < NV; ++v) c[m][v] = fma(a, bv[v], c[m][v]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) store(C.row(m) + n + W * v, c[m][v]);
}

// Columns [n0, n1) of C (n1 - n0 a multiple of V's width), rows in blocks of MR, then smaller.
template <typename V, int MR, int NV, bool Rest, typename AT, typename BT, typename CT>
inline void col_block(int64_t M, int64_t n0, int64_t n1, int64_t K, const AT& A, const BT& B, const CT& C,
                      bool accumulate) {
  constexpr int W = V::width;
  int64_t m = 0;
  for (; m + MR <= M; m += MR) {
    int64_t n = n0;
    for (; n + W * NV <= n1; n += W * NV) tile<V, MR, NV>(K, A.from(m), B, C.from(m), n, accumulate);
    for (; n < n1; n += W) tile<V, MR, 1>(K, A.from(m), B, C.from(m), n, accumulate);
  }
  if constexpr (Rest && MR > 1) {
    constexpr int MR2 = MR / 2;
    constexpr int NV2 = NV * 2 > 4 ? 4 : NV * 2;
    if (m < M) col_block<V, MR2, NV2, true>(M - m, n0, n1, K, A.from(m), B, C.from(m), accumulate);
  }
}

// Columns [0, NW) of C, NW = N in whole V vectors: a one-vector-wide C in tiles of TALL rows, a wider one in tiles of
// 6 rows x 2 vectors, then 4 x 2 and smaller for the last rows. Returns NW.
template <typename V, int TALL, typename AT, typename BT, typename CT>
inline int64_t whole_vectors(int64_t M, int64_t N, int64_t K, const AT& A, const BT& B, const CT& C, bool accumulate) {
  constexpr int W = V::width;
  const int64_t NW = N / W * W;
  if (NW == W) {
    col_block<V, TALL, 1, true>(M, 0, W, K, A, B, C, accumulate);
  } else if (NW > 0) {
    const int64_t M6 = M / 6 * 6;
    if (M6) col_block<V, 6, 2, false>(M6, 0, NW, K, A, B, C, accumulate);
    if (M > M6) col_block<V, 4, 2, true>(M - M6, 0, NW, K, A.from(M6), B, C.from(M6), accumulate);
  }
  return NW;
}

// C[M x N] (+)= A[M x K] * B[K x N] over any operand views. Register tiles of the widest vectors: with AVX-512
// 16 rows when C is one vector wide, else 6 x 32 columns, then 4 x 32, 2 x 64, .. (6 x 32 measured faster than
// 8 or 12 rows on a Zen 4, whose 512-bit FMAs run as two 256-bit halves); with AVX2 (16 registers) 8 rows when
// C is one vector wide, else 6 x 16, 4 x 16, 2 x 32. Then an 8-float vector (AVX-512) and a 4-float vector for
// the remaining columns, scalar loops for the rest.
template <typename AT, typename BT, typename CT>
inline void nn_view(int64_t M, int64_t N, int64_t K, const AT& A, const BT& B, const CT& C, bool accumulate) {
#if defined(DLRMBENCH_AVX512)
  const int64_t N16 = whole_vectors<V16, 16>(M, N, K, A, B, C, accumulate);
  const int64_t N8 = N16 + ((N - N16) >= 8 ? 8 : 0);
  if (N8 > N16) col_block<V8, 8, 1, true>(M, N16, N8, K, A, B, C, accumulate);
#else
  const int64_t N8 = whole_vectors<V8, 8>(M, N, K, A, B, C, accumulate);
#endif
  const int64_t N4 = N8 + ((N - N8) >= 4 ? 4 : 0);
  if (N4 > N8) col_block<V4, 8, 1, true>(M, N8, N4, K, A, B, C, accumulate);
  if (N4 == N) return;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = N4; n < N; ++n) {
      float s = accumulate ? C.row(m)[n] : 0.f;
      for (int64_t k = 0; k < K; ++k) s += A.at(m, k) * B.row(k)[n];
      C.row(m)[n] = s;
    }
  }
}

// C[M x N] (+)= A[M x K] * B[K x N] with A(i, k) = A[i*ars + k*acs]; B and C row-major.
inline void nn_strided(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t acs, const float* B,
                       int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  nn_view(M, N, K, StridedA{A, ars, acs}, StridedB{B, ldb}, StridedC{C, ldc}, accumulate);
}

// C[M x N] (+)= A[M x K] * B[N x K]^T as dot products along K (both operands contiguous in K), in the widest
// vectors, then 8-float vectors (AVX-512) and scalars for the rest of K.
template <typename V>
inline void dot4(const float* a, const float* b0, int64_t ldb, int64_t k0, int64_t k1, float r[4]) {
  constexpr int W = V::width;
  V s0 = bcast(0.f, V{}), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t k = k0; k < k1; k += W) {
    const V av = load(a + k, V{});
    s0 = fma(av, load(b0 + k, V{}), s0);
    s1 = fma(av, load(b0 + ldb + k, V{}), s1);
    s2 = fma(av, load(b0 + 2 * ldb + k, V{}), s2);
    s3 = fma(av, load(b0 + 3 * ldb + k, V{}), s3);
  }
  r[0] += hsum(s0);
  r[1] += hsum(s1);
  r[2] += hsum(s2);
  r[3] += hsum(s3);
}

template <typename V>
inline float dot1(const float* a, const float* b, int64_t k0, int64_t k1) {
  constexpr int W = V::width;
  V s = bcast(0.f, V{});
  for (int64_t k = k0; k < k1; k += W) s = fma(load(a + k, V{}), load(b + k, V{}), s);
  return hsum(s);
}

template <typename AR, typename CT>
inline void nt_dot_view(int64_t M, int64_t N, int64_t K, const AR& Arow, const float* B, int64_t ldb, const CT& Cv,
                        bool accumulate) {
  constexpr int W = VW::width;
  const int64_t KW = K / W * W, K8 = KW + (K - KW) / 8 * 8;
  for (int64_t m = 0; m < M; ++m) {
    const float* a = Arow(m);
    float* crow = Cv.row(m);
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
      const float* b0 = B + n * ldb;
      float r[4] = {0.f, 0.f, 0.f, 0.f};
      if (KW) dot4<VW>(a, b0, ldb, 0, KW, r);
      if (K8 > KW) dot4<V8>(a, b0, ldb, KW, K8, r);
      for (int64_t k = K8; k < K; ++k)
        for (int j = 0; j < 4; ++j) r[j] += a[k] * b0[j * ldb + k];
      for (int j = 0; j < 4; ++j) crow[n + j] = (accumulate ? crow[n + j] : 0.f) + r[j];
    }
    for (; n < N; ++n) {
      const float* b = B + n * ldb;
      float r = 0.f;
      if (KW) r += dot1<VW>(a, b, 0, KW);
      if (K8 > KW) r += dot1<V8>(a, b, KW, K8);
      for (int64_t k = K8; k < K; ++k) r += a[k] * b[k];
      crow[n] = (accumulate ? crow[n] : 0.f) + r;
    }
  }
}

inline void nt_dot(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc, bool accumulate) {
  nt_dot_view(M, N, K, [&](int64_t m) { return A + m * lda; }, B, ldb, StridedC{C, ldc}, accumulate);
}

// dst[c x r] = src[r x c]^T.
inline void transpose(int64_t rows, int64_t cols, const float* src, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

// C[M x N] (+)= A[M x K] * B[K x N], all row-major and contiguous. `scratch` holds K*N floats; it is
// used when N < 4 (B is transposed once and the product runs as dot products along K).
inline void nn(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate,
               float* scratch) {
  if (N >= 4 || K < 8) {
    nn_strided(M, N, K, A, K, 1, B, N, C, N, accumulate);
    return;
  }
  transpose(K, N, B, scratch);
  nt_dot(M, N, K, A, K, scratch, K, C, N, accumulate);
}

// C[M x N] (+)= A[M x K] * B^T where B is [N x K], row-major and contiguous. `scratch` holds K*N
// floats; it is used when K < 8 (B is transposed once and the product runs register-tiled).
inline void nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate,
               float* scratch) {
  if (K >= 8) {
    nt_dot(M, N, K, A, K, B, K, C, N, accumulate);
    return;
  }
  transpose(N, K, B, scratch);
  nn_strided(M, N, K, A, K, 1, scratch, N, C, N, accumulate);
}

// C[K x N] (+)= A[M x K]^T * B[M x N], all row-major and contiguous (a sum of M rank-1 updates).
inline void tn(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate) {
  nn_strided(K, N, M, A, 1, K, B, N, C, N, accumulate);
}

}  // namespace gemm
}  // namespace DLRMBENCH_ISA_NS
}  // namespace dlrmbench
