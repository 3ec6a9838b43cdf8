// The small-GEMM micro-kernels every TT op shares (fp32, row-major). Register-tiled over 8-float
// vectors (AVX2+FMA when the compiler targets it, plain loops otherwise), no allocation: callers
// pass scratch. Sizes are those of TT core slices: one dimension is often tiny (q_k = 2..8), so each
// entry point picks the orientation that keeps the long dimension in the vector lanes.
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace dlrmbench {
namespace gemm {

#if defined(__AVX2__) && defined(__FMA__)
struct V4 {
  __m128 v;
  static constexpr int width = 4;
};
inline V4 load(const float* p, V4) { return {_mm_loadu_ps(p)}; }
inline void store(float* p, V4 x) { _mm_storeu_ps(p, x.v); }
inline V4 bcast(float a, V4) { return {_mm_set1_ps(a)}; }
inline V4 fma(V4 a, V4 b, V4 c) { return {_mm_fmadd_ps(a.v, b.v, c.v)}; }
struct V8 {
  __m256 v;
  static constexpr int width = 8;
};
inline V8 load(const float* p, V8) { return {_mm256_loadu_ps(p)}; }
inline V8 bcast(float a, V8) { return {_mm256_set1_ps(a)}; }
inline V8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store(float* p, V8 x) { _mm256_storeu_ps(p, x.v); }
inline V8 zero() { return {_mm256_setzero_ps()}; }
inline V8 bcast(float a) { return {_mm256_set1_ps(a)}; }
inline V8 fma(V8 a, V8 b, V8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
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
using V4 = VN<4>;
using V8 = VN<8>;
inline V8 load(const float* p) { return load(p, V8{}); }
inline V8 zero() { return V8{}; }
inline V8 bcast(float a) { return bcast(a, V8{}); }
inline float hsum(V8 x) {
  float t = 0.f;
  for (int i = 0; i < 8; ++i) t += x.v[i];
  return t;
}
#endif

// C[MR x W*NV] (+)= A[MR x K] * B[K x W*NV] in W-float vectors; A(i, k) = A[i*ars + k*acs] (so A may
// be a transposed view).
template <typename V, int MR, int NV>
inline void tile(int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb, float* C,
                 int64_t ldc, bool accumulate) {
  constexpr int W = V::width;
  V c[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NV; ++n) c[m][n] = accumulate ? load(C + m * ldc + W * n, V{}) : bcast(0.f, V{});
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    V bv[NV];
    for (int n = 0; n < NV; ++n) bv[n] = load(b + W * n, V{});
    for (int m = 0; m < MR; ++m) {
      const V a = bcast(A[m * ars + k * acs], V{});
      for (int n = 0; n < NV; ++n) c[m][n] = fma(a, bv[n], c[m][n]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NV; ++n) store(C + m * ldc + W * n, c[m][n]);
}

// Columns [n0, n1) of C (n1 - n0 a multiple of V's width), rows in blocks of MR, then smaller.
template <typename V, int MR, int NV>
inline void col_block(int64_t M, int64_t n0, int64_t n1, int64_t K, const float* A, int64_t ars, int64_t acs,
                      const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  constexpr int W = V::width;
  int64_t m = 0;
  for (; m + MR <= M; m += MR) {
    int64_t n = n0;
    for (; n + W * NV <= n1; n += W * NV)
      tile<V, MR, NV>(K, A + m * ars, ars, acs, B + n, ldb, C + m * ldc + n, ldc, accumulate);
    for (; n < n1; n += W) tile<V, MR, 1>(K, A + m * ars, ars, acs, B + n, ldb, C + m * ldc + n, ldc, accumulate);
  }
  if constexpr (MR > 1) {
    constexpr int MR2 = MR / 2;
    constexpr int NV2 = NV * 2 > 4 ? 4 : NV * 2;
    if (m < M) col_block<V, MR2, NV2>(M - m, n0, n1, K, A + m * ars, ars, acs, B, ldb, C + m * ldc, ldc, accumulate);
  }
}

// C[M x N] (+)= A[M x K] * B[K x N] with A(i, k) = A[i*ars + k*acs]. Register tiles of 8-float vectors
// (8 rows when C is one vector wide, else 4 x 16 / 2 x 32), a 4-float vector for a remaining 4 columns,
// scalar loops for the rest.
inline void nn_strided(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t acs, const float* B,
                       int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  const int64_t N8 = N / 8 * 8;
  const int64_t N4 = N8 + ((N - N8) >= 4 ? 4 : 0);
  if (N8 == 8) {
    col_block<V8, 8, 1>(M, 0, 8, K, A, ars, acs, B, ldb, C, ldc, accumulate);
  } else if (N8 > 0) {
    col_block<V8, 4, 2>(M, 0, N8, K, A, ars, acs, B, ldb, C, ldc, accumulate);
  }
  if (N4 > N8) col_block<V4, 8, 1>(M, N8, N4, K, A, ars, acs, B, ldb, C, ldc, accumulate);
  if (N4 == N) return;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = N4; n < N; ++n) {
      float s = accumulate ? C[m * ldc + n] : 0.f;
      for (int64_t k = 0; k < K; ++k) s += A[m * ars + k * acs] * B[k * ldb + n];
      C[m * ldc + n] = s;
    }
  }
}

// C[M x N] (+)= A[M x K] * B[N x K]^T as dot products along K (both operands contiguous in K).
inline void nt_dot(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc, bool accumulate) {
  const int64_t K8 = K / 8 * 8;
  for (int64_t m = 0; m < M; ++m) {
    const float* a = A + m * lda;
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
      const float* b0 = B + n * ldb;
      V8 s0 = zero(), s1 = zero(), s2 = zero(), s3 = zero();
      for (int64_t k = 0; k < K8; k += 8) {
        const V8 av = load(a + k);
        s0 = fma(av, load(b0 + k), s0);
        s1 = fma(av, load(b0 + ldb + k), s1);
        s2 = fma(av, load(b0 + 2 * ldb + k), s2);
        s3 = fma(av, load(b0 + 3 * ldb + k), s3);
      }
      float r[4] = {hsum(s0), hsum(s1), hsum(s2), hsum(s3)};
      for (int64_t k = K8; k < K; ++k)
        for (int j = 0; j < 4; ++j) r[j] += a[k] * b0[j * ldb + k];
      for (int j = 0; j < 4; ++j) C[m * ldc + n + j] = (accumulate ? C[m * ldc + n + j] : 0.f) + r[j];
    }
    for (; n < N; ++n) {
      const float* b = B + n * ldb;
      V8 s = zero();
      for (int64_t k = 0; k < K8; k += 8) s = fma(load(a + k), load(b + k), s);
      float r = hsum(s);
      for (int64_t k = K8; k < K; ++k) r += a[k] * b[k];
      C[m * ldc + n] = (accumulate ? C[m * ldc + n] : 0.f) + r;
    }
  }
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
}  // namespace dlrmbench
