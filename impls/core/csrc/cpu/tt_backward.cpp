// CPU kernels of the TT backward stages (schemas in ../ops.cpp):
//   tt_last_backward:   per item, dG_last[j] += P^T dE and dP_group += dE G_last[j]^T (2 GEMMs);
//                       items of one group are contiguous, so dP is summed per group without locks.
//   tt_prefix_backward: per prefix id, walk dP back through cores d-2..0 (2 GEMMs per step, plus the
//                       recomputed inner products for d = 4) and add into the dense core gradients.
// Core-gradient rows are shared between lookups; adds go through striped row locks (the GPU kernels
// use atomicAdd), so the summation order, not the result, varies between runs.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../op_args.h"
#include "cpu_util.h"
#include "tt_chain.h"

namespace dlrmbench {
namespace {

constexpr int64_t kGrain = 16;

// Segment starts of a non-decreasing group map: items of group g are [start[g], start[g+1]).
std::vector<int64_t> group_starts(const char* op, const int64_t* grp, int64_t n, int64_t groups) {
  std::vector<int64_t> start(groups + 1, n);
  int64_t prev = -1;
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(grp[i] >= prev, op, ": item_group must be non-decreasing (items of a group contiguous); "
                      "item_group[", i, "] = ", grp[i], " follows ", prev);
    TORCH_CHECK_VALUE(grp[i] < groups, op, ": item_group[", i, "] = ", grp[i], " is outside [0, ", groups, ")");
    for (int64_t g = prev + 1; g <= grp[i]; ++g) start[g] = i;
    prev = grp[i];
  }
  return start;
}

void tt_last_backward_cpu(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                          const at::Tensor& item_group, const at::Tensor& item_last, const at::Tensor& grad_items,
                          at::Tensor grad_last_core, at::Tensor grad_prefix) {
  const char* op = "tt_last_backward";
  const TTShape s = check_tt_last_backward_args(prefix, cores, q, r, item_group, item_last, grad_items,
                                                grad_last_core, grad_prefix);
  const int L = s.d - 1;
  const int64_t n = item_group.numel();
  const auto grp_c = item_group.contiguous();
  const auto last_c = item_last.contiguous();
  const int64_t* grp = grp_c.data_ptr<int64_t>();
  const int64_t* last = last_c.data_ptr<int64_t>();
  check_range(op, "item_last", last, n, s.p[L]);
  const int64_t G = prefix.size(0);
  const std::vector<int64_t> start = group_starts(op, grp, n, G);

  const int64_t M = s.Q(L - 1), qn = s.q[L], rk = s.r[L], width = s.prefix_width(), D = s.dim();
  float* dP = grad_prefix.data_ptr<float>();
  const float* P = prefix.data_ptr<float>();
  const float* dE = grad_items.data_ptr<float>();
  float* dG = grad_last_core.data_ptr<float>();
  // The last core transposed once per call, slice j as (qn x rk), so both products below read their
  // operands in place: dP_g (M x rk) (+)= dE_i (M x qn) * Gt[j] (qn x rk), and
  // dG_last[j] (rk x qn) += P_g^T (rk x M) * dE_i (M x qn) (accumulated under the row's lock).
  std::vector<float> Gt(s.p[L] * rk * qn);
  const float* Gl = cores[L].data_ptr<float>();
  at::parallel_for(0, s.p[L], 64, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) gemm::transpose(rk, qn, Gl + j * rk * qn, Gt.data() + j * rk * qn);
  });
  RowLocks locks(s.p[L]);
  at::parallel_for(0, G, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) {
      const float* Pg = P + g * width;
      float* dPg = dP + g * width;
      if (start[g] == start[g + 1]) std::fill(dPg, dPg + width, 0.f);
      for (int64_t i = start[g]; i < start[g + 1]; ++i) {
        const float* e = dE + i * D;
        const int64_t j = last[i];
        gemm::nn_strided(M, rk, qn, e, qn, 1, Gt.data() + j * rk * qn, rk, dPg, rk, i > start[g]);
        locks.lock(j);
        gemm::nn_strided(rk, qn, M, Pg, 1, rk, e, qn, dG + j * rk * qn, qn, true);
        locks.unlock(j);
      }
    }
  });
}

void tt_prefix_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                            const at::Tensor& grad_prefix, at::TensorList grad_cores) {
  const char* op = "tt_prefix_backward";
  const TTShape s = check_tt_prefix_backward_args(cores, q, r, prefix_ids, grad_prefix, grad_cores);
  const auto ids = prefix_ids.contiguous();
  const int64_t G = ids.numel();
  const int64_t* gid = ids.data_ptr<int64_t>();
  check_range(op, "prefix_ids", gid, G, s.num_prefixes());
  float* dG[3] = {nullptr, nullptr, nullptr};
  std::vector<std::unique_ptr<RowLocks>> locks;
  for (int k = 0; k < s.d - 1; ++k) {
    dG[k] = grad_cores[k].data_ptr<float>();
    locks.emplace_back(new RowLocks(s.p[k]));
  }
  const float* dPin = grad_prefix.data_ptr<float>();
  const int64_t width = s.prefix_width();
  const CoreView c = core_view(s, cores);
  const int64_t w0 = s.core_width(0);
  auto add_core0 = [&](int64_t row, const float* d) {
    float* g0 = dG[0] + row * w0;
    locks[0]->lock(row);
    for (int64_t k = 0; k < w0; ++k) g0[k] += d[k];
    locks[0]->unlock(row);
  };
  if (s.d == 2) {
    at::parallel_for(0, G, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) add_core0(gid[i], dPin + i * width);
    });
    return;
  }
  // Last chain step t = d-2, run by run of equal digit j (see order_by_last_prefix_digit):
  //   dG_t[j] += P_{t-1}^T dP_t (one stacked GEMM per run), dP_{t-1} = dP_t G_t[j]^T;
  // then per prefix the remaining steps (d = 4) and the add into core 0.
  const int t = s.d - 2;
  const int64_t M = s.Q(t - 1), K = s.r[t], N = s.q[t] * s.r[t + 1];
  const std::vector<int64_t> order = order_by_last_prefix_digit(s, gid, G);
  at::parallel_for(0, G, kGrain, [&](int64_t lo, int64_t hi) {
    ChainScratch w(s);
    std::vector<float> inner(s.d > 3 ? kStack * M * K : 0), dPprev(kStack * M * K);
    std::vector<float> cur(s.max_chain_width()), next(s.max_chain_width());
    std::vector<const float*> prows(kStack * M), trows(kStack * M);
    int64_t digits[4];
    for_each_run(order, lo, hi, [&](int64_t x) { return gid[x] % s.p[t]; }, [&](int64_t i, int64_t e, int64_t j) {
      const int64_t nb = e - i;
      for (int64_t b = i; b < e; ++b) {  // operands read in place through row pointers
        s.prefix_digits(gid[order[b]], digits);
        const float* p = c.row(0, digits[0]);
        if (s.d > 3) {
          float* slot = inner.data() + (b - i) * M * K;
          prefix_chain(s, c, digits, t - 1, w, slot);
          p = slot;
        }
        for (int64_t m = 0; m < M; ++m) {
          prows[(b - i) * M + m] = p + m * K;
          trows[(b - i) * M + m] = dPin + order[b] * width + m * N;
        }
      }
      locks[t]->lock(j);  // dG_t[j] (K x N) += P_{t-1}^T dP_t over the run
      gemm::nn_view(K, N, nb * M, gemm::ColsA{prows.data(), 0}, gemm::RowsB{trows.data()},
                    gemm::StridedC{dG[t] + j * s.core_width(t), N}, true);
      locks[t]->unlock(j);
      gemm::nt_dot_view(nb * M, K, N, [&](int64_t m) { return trows[m]; }, c.row(t, j), N,
                        gemm::StridedC{dPprev.data(), K}, false);  // dP_{t-1} = dP_t G_t[j]^T
      for (int64_t b = i; b < e; ++b) {
        s.prefix_digits(gid[order[b]], digits);
        const float* dPt = dPprev.data() + (b - i) * M * K;  // dP_{t-1}
        for (int u = t - 1; u >= 1; --u) {  // d = 4: one more step through core 1 (P_0 is core 0's slice)
          const int64_t Mu = s.Q(u - 1), Nu = s.q[u] * s.r[u + 1], Ku = s.r[u];
          const float* P0 = c.row(0, digits[0]);
          locks[u]->lock(digits[u]);
          gemm::tn(Mu, Nu, Ku, P0, dPt, dG[u] + digits[u] * s.core_width(u), true);
          locks[u]->unlock(digits[u]);
          gemm::nt(Mu, Ku, Nu, dPt, c.row(u, digits[u]), next.data(), false, w.tmp);
          std::swap(cur, next);
          dPt = cur.data();
        }
        add_core0(digits[0], dPt);
      }
    });
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("tt_last_backward", &tt_last_backward_cpu);
  m.impl("tt_prefix_backward", &tt_prefix_backward_cpu);
}

}  // namespace dlrmbench
