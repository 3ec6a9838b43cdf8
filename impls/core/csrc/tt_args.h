// Argument checking and shape arithmetic shared by the CPU and CUDA TT kernels (host side only).
//
// A d-core TT table (2 <= d <= 4) has cores[k] of shape [p_k, r_k * q_k * r_{k+1}] (0-based k, r_0 =
// r_d = 1); the slice for digit i is a row-major (r_k, q_k, r_{k+1}) tensor. A row id x has digits
// i_0..i_{d-1}, the first most significant; its prefix id is g = x div p_{d-1} (the digits of all
// cores but the last) and its last digit x mod p_{d-1}. The prefix product P(g) of the first d-1 cores
// is a row-major (Q_{d-2} x r_{d-1}) matrix, Q_t = q_0 * ... * q_t; the embedding row is
// P(g) * G_{d-1}[last] viewed as (Q_{d-2} x q_{d-1}), i.e. D = Q_{d-1} values, q_0 most significant.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace dlrmbench {

struct TTShape {
  int d = 0;
  int64_t p[4] = {0, 0, 0, 0};
  int64_t q[4] = {0, 0, 0, 0};
  int64_t r[5] = {1, 1, 1, 1, 1};

  int64_t Q(int t) const {  // q_0 * ... * q_t
    int64_t v = 1;
    for (int k = 0; k <= t; ++k) v *= q[k];
    return v;
  }
  int64_t dim() const { return Q(d - 1); }
  int64_t prefix_width() const { return Q(d - 2) * r[d - 1]; }
  int64_t num_prefixes() const {
    int64_t v = 1;
    for (int k = 0; k < d - 1; ++k) v *= p[k];
    return v;
  }
  int64_t core_width(int k) const { return r[k] * q[k] * r[k + 1]; }
  // Digits of prefix id g (< num_prefixes()) into out[0..d-2].
  void prefix_digits(int64_t g, int64_t* out) const {
    for (int k = d - 2; k >= 0; --k) {
      out[k] = g % p[k];
      g /= p[k];
    }
  }
  // Largest per-row scratch any chain step needs: the widest P_t plus one transposed core slice.
  int64_t max_chain_width() const {
    int64_t w = 0;
    for (int t = 0; t < d - 1; ++t) {
      const int64_t pw = Q(t) * r[t + 1];
      if (pw > w) w = pw;
    }
    return w;
  }
};

inline TTShape parse_tt_shape(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r) {
  TTShape s;
  const int64_t d = static_cast<int64_t>(cores.size());
  TORCH_CHECK_VALUE(d >= 2 && d <= 4, op, ": a TT table has 2 to 4 cores, got ", d);
  TORCH_CHECK_VALUE(static_cast<int64_t>(q.size()) == d, op, ": q has ", q.size(), " entries for ", d, " cores");
  TORCH_CHECK_VALUE(static_cast<int64_t>(r.size()) == d + 1, op, ": r has ", r.size(), " entries, expected ", d + 1,
                    " (r_0 = r_d = 1 included)");
  TORCH_CHECK_VALUE(r[0] == 1 && r[d] == 1, op, ": r_0 and r_d must be 1");
  s.d = static_cast<int>(d);
  for (int64_t k = 0; k <= d; ++k) {
    TORCH_CHECK_VALUE(r[k] > 0, op, ": ranks must be positive");
    s.r[k] = r[k];
  }
  for (int64_t k = 0; k < d; ++k) {
    const auto& c = cores[k];
    TORCH_CHECK_VALUE(q[k] > 0, op, ": q must be positive");
    s.q[k] = q[k];
    TORCH_CHECK_VALUE(c.dim() == 2 && c.scalar_type() == at::kFloat && c.is_contiguous(), op, ": core ", k,
                      " must be a contiguous 2-D float32 tensor");
    TORCH_CHECK_VALUE(c.device() == cores[0].device(), op, ": all cores must be on one device");
    s.p[k] = c.size(0);
    TORCH_CHECK_VALUE(s.p[k] > 0, op, ": core ", k, " has no rows");
    TORCH_CHECK_VALUE(c.size(1) == s.core_width(k), op, ": core ", k, " has width ", c.size(1),
                      ", expected r_k*q_k*r_{k+1} = ", s.core_width(k));
  }
  return s;
}

inline void check_index(const char* op, const char* name, const at::Tensor& t, const at::Tensor& like) {
  TORCH_CHECK_VALUE(t.dim() == 1 && t.scalar_type() == at::kLong, op, ": ", name, " must be a 1-D int64 tensor");
  TORCH_CHECK_VALUE(t.device() == like.device(), op, ": ", name, " is on ", t.device(), ", expected ", like.device());
}

inline void check_rows(const char* op, const char* name, const at::Tensor& t, int64_t rows, int64_t cols,
                       const at::Tensor& like) {
  TORCH_CHECK_VALUE(t.dim() == 2 && t.scalar_type() == at::kFloat && t.is_contiguous(), op, ": ", name,
                    " must be a contiguous 2-D float32 tensor");
  TORCH_CHECK_VALUE((rows < 0 || t.size(0) == rows) && t.size(1) == cols, op, ": ", name, " has shape ",
                    t.sizes(), ", expected [", rows < 0 ? std::string("*") : std::to_string(rows), ", ", cols, "]");
  TORCH_CHECK_VALUE(t.device() == like.device(), op, ": ", name, " is on ", t.device(), ", expected ", like.device());
}

}  // namespace dlrmbench
