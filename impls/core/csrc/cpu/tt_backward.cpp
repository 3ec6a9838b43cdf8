// CPU kernels of the TT backward stages (schemas in ../ops.cpp):
//   tt_last_backward:   dP_g = sum over the group's items of dE_i G_last[j_i]^T (one writer per group), and
//                       dG_last[j] += sum over items with last digit j of P_g^T dE_i, both in one pass in
//                       item order, where P_g and dE stream from memory (cpu_util.h: chunked_scatter_add);
//   tt_prefix_backward: walk dP back through cores d-2..0, dG_t[j] += P_{t-1}^T dP_t per step (plus the
//                       recomputed inner products for d = 4), and add dP_0 into core 0.
// A core-gradient row is shared by every lookup with that digit. In the prefix walk the lookups are ordered
// by the digit and a digit's run is summed whole by one thread, stacked into tall GEMMs; core 0 and the last
// core are summed per fixed chunk of items into the chunk's own copy (cpu_util.h: parallel_runs,
// chunked_scatter_add). Either way the gradients are bit-identical from run to run and for any thread count.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../op_args.h"
#include "cpu_util.h"
#include "stage2.h"
#include "tt_chain.h"
#include "tt_kernels.h"

namespace dlrmbench {
inline namespace DLRMBENCH_ISA_NS {

constexpr int64_t kBackwardGrain = 16;

void tt_last_backward_cpu(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                          const at::Tensor& item_group, const at::Tensor& item_last, const at::Tensor& grad_items,
                          at::Tensor grad_last_core, at::Tensor grad_prefix, bool /*check_indices*/) {
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

  const int64_t width = s.prefix_width(), wl = s.core_width(L);
  float* dP = grad_prefix.data_ptr<float>();
  const float* P = prefix.data_ptr<float>();
  const float* dE = grad_items.data_ptr<float>();
  const CoreView c = core_view(s, cores);
  // Group by group in item order (P_g and dE stream), chunks aligned to group starts (stage2.h): dP_g has one
  // writer; dG_last is summed transposed into each chunk's copy (chunked_scatter_add), then added back.
  const std::vector<float> Gt = transposed_last_core(s, c);
  std::vector<float> dGt(s.p[L] * wl, 0.f);
  auto group_start = [&](int64_t g) { return g; };
  chunked_scatter_add(G, 4 * s.Q(L - 1) * s.r[L] * s.q[L] * std::max<int64_t>(1, n / std::max<int64_t>(G, 1)), s.p[L],
                      wl, dGt.data(), group_start, [&](int64_t lo, int64_t hi, float* out) {
    Stage2Rows w(s);
    for (int64_t g = lo; g < hi; ++g)
      stage2_items_backward(s, Gt.data(), P + g * width, dE + start[g] * s.dim(), last + start[g],
                            start[g + 1] - start[g], dP + g * width, out, w);
  });
  add_transposed(s, dGt.data(), grad_last_core.data_ptr<float>());
}

// One thread's working memory for a step t >= 2 (d = 4): the stacked operands and the recomputed P_{t-1}.
struct StepScratch {
  StackRows rows;
  ChainScratch chain;
  std::vector<float> inner;
  StepScratch(const TTShape& s, int t) : rows(s.Q(t - 1)), chain(s), inner(kStack * s.Q(t - 1) * s.r[t]) {}
};

void tt_prefix_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                            const at::Tensor& grad_prefix, at::TensorList grad_cores, bool /*check_indices*/) {
  const char* op = "tt_prefix_backward";
  const TTShape s = check_tt_prefix_backward_args(cores, q, r, prefix_ids, grad_prefix, grad_cores);
  const auto ids = prefix_ids.contiguous();
  const int64_t G = ids.numel();
  const int64_t* gid = ids.data_ptr<int64_t>();
  check_range(op, "prefix_ids", gid, G, s.num_prefixes());
  if (G == 0) return;
  const CoreView c = core_view(s, cores);
  // The walk's state at position x: prefix id pid[x] and its dP_t at dP + x * dPw.
  std::vector<int64_t> pid(gid, gid + G), key(G);
  const float* dP = grad_prefix.data_ptr<float>();
  int64_t dPw = s.prefix_width();
  std::vector<float> held;  // dP_{t-1} of the step before, by position
  auto digit = [&](int64_t g, int k) {
    int64_t digits[4];
    s.prefix_digits(g, digits);
    return digits[k];
  };
  auto order_by_digit = [&](int k) {
    for (int64_t x = 0; x < G; ++x) key[x] = digit(pid[x], k);
    return order_by_key(G, s.p[k], [&](int64_t x) { return key[x]; });
  };
  // Steps t = d-2 .. 2 (d = 4), run by run of equal digit j = i_t (one thread per run, so one writer per row
  // of dG_t), P_{t-1} recomputed per prefix; dP_{t-1} kept by position for the next step.
  for (int t = s.d - 2; t >= 2; --t) {
    const int64_t M = s.Q(t - 1), K = s.r[t];
    const std::vector<int64_t> order = order_by_digit(t);
    std::vector<float> out(G * M * K);
    float* dGt = grad_cores[t].data_ptr<float>();
    parallel_runs(order, kBackwardGrain, [&](int64_t x) { return key[x]; }, [&] { return StepScratch(s, t); },
                  [&](StepScratch& w, int64_t j, int64_t b, int64_t e) {
      int64_t digits[4];
      for (int64_t c0 = b; c0 < e; c0 += kStack) {
        const int64_t ce = std::min(e, c0 + kStack);
        for (int64_t x = c0; x < ce; ++x) {
          s.prefix_digits(pid[order[x]], digits);
          float* slot = w.inner.data() + (x - c0) * M * K;
          prefix_chain(s, c, digits, t - 1, w.chain, slot);
          w.rows.set(x - c0, slot, K, dP + order[x] * dPw, s.q[t] * s.r[t + 1]);
        }
        stacked_step(s, c, t, j, ce - c0, w.rows, dGt, out.data() + c0 * M * K);
      }
    });
    std::vector<int64_t> next(G);
    for (int64_t x = 0; x < G; ++x) next[x] = pid[order[x]];
    pid.swap(next);
    held.swap(out);
    dP = held.data();
    dPw = M * K;
  }
  // The last step (t = 1, d >= 3) and core 0, with no per-prefix buffer: positions ordered by digit 1, cut into
  // run-aligned chunks whose count is fixed by the sizes (chunked_scatter_add). A chunk runs its runs whole (one
  // writer per row of dG_1), computes dP_0 per kStack prefixes and adds it into its own copy of dG_0.
  // d = 2: the prefix is core 0's slice, and dP is its gradient.
  const int64_t w0 = s.core_width(0);
  float* dG0 = grad_cores[0].data_ptr<float>();
  if (s.d == 2) {
    chunked_scatter_add(G, 4 * w0, s.p[0], w0, dG0, [](int64_t b) { return b; },
                        [&](int64_t lo, int64_t hi, float* buf) {
                          for (int64_t x = lo; x < hi; ++x) add_row(buf + pid[x] * w0, dP + x * dPw, w0);
                        });
    return;
  }
  const std::vector<int64_t> order = order_by_digit(1);
  const int64_t M = s.Q(0), K = s.r[1], N = s.q[1] * s.r[2];
  float* dG1 = grad_cores[1].data_ptr<float>();
  auto run_start = [&](int64_t b) {
    while (b > 0 && b < G && key[order[b]] == key[order[b - 1]]) ++b;
    return b;
  };
  chunked_scatter_add(G, 4 * M * K * N, s.p[0], w0, dG0, run_start, [&](int64_t lo, int64_t hi, float* buf) {
    StackRows rows(M);
    std::vector<float> dP0(kStack * M * K), slice_t(K * N);  // slice_t: G_1[j] transposed, for a long run
    for (int64_t i = lo; i < hi;) {
      const int64_t j = key[order[i]];
      int64_t e = i + 1;
      while (e < hi && key[order[e]] == j) ++e;
      if (e - i >= kLongRun) gemm::transpose(K, N, c.row(1, j), slice_t.data());
      for (int64_t c0 = i; c0 < e; c0 += kStack) {
        const int64_t ce = std::min(e, c0 + kStack);
        for (int64_t x = c0; x < ce; ++x)  // P_0 is core 0's slice, read in place
          rows.set(x - c0, c.row(0, digit(pid[order[x]], 0)), K, dP + order[x] * dPw, N);
        stacked_step(s, c, 1, j, ce - c0, rows, dG1, dP0.data(), ce - c0 >= kLongRun ? slice_t.data() : nullptr);
        for (int64_t x = c0; x < ce; ++x) add_row(buf + digit(pid[order[x]], 0) * w0, dP0.data() + (x - c0) * w0, w0);
      }
      i = e;
    }
  });
}

}  // namespace DLRMBENCH_ISA_NS

}  // namespace dlrmbench
