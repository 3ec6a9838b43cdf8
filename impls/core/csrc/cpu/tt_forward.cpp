// CPU kernels of the TT forward stages (schemas in ../ops.cpp):
//   tt_prefix: stage 1, one prefix product per prefix id (d-2 GEMMs each);
//   tt_last:   stage 2, one GEMM per item with the last core.
// Each system decides what a "prefix id" and an "item" is (an occurrence, a unique id, a prefix group).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <cstring>

#include "../op_args.h"
#include "cpu_util.h"
#include "stage2.h"
#include "tt_chain.h"
#include "tt_kernels.h"

namespace dlrmbench {
inline namespace DLRMBENCH_ISA_NS {

constexpr int64_t kForwardGrain = 32;


void tt_prefix_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                   at::Tensor out, bool /*check_indices*/) {
  const TTShape s = check_tt_prefix_args(cores, q, r, prefix_ids, out);
  const auto ids = prefix_ids.contiguous();
  const int64_t G = ids.numel();
  const int64_t* g = ids.data_ptr<int64_t>();
  check_range("tt_prefix", "prefix_ids", g, G, s.num_prefixes());
  float* o = out.data_ptr<float>();
  const CoreView c = core_view(s, cores);
  const int64_t width = s.prefix_width();
  if (s.d == 2) {  // the prefix is core 0's slice itself
    at::parallel_for(0, G, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) std::memcpy(o + i * width, c.row(0, g[i]), sizeof(float) * width);
    });
    return;
  }
  // Runs of prefixes sharing the last prefix digit, each one tall GEMM (PrefixStack).
  const PrefixDigits pd(s, g, G);
  const std::vector<int64_t> order = order_by_last_prefix_digit(s, pd, G);
  at::parallel_for(0, G, kForwardGrain, [&](int64_t lo, int64_t hi) {
    PrefixStack stack(s, c);
    for_each_run(order, lo, hi, [&](int64_t x) { return pd.last(x); }, [&](int64_t i, int64_t e, int64_t j) {
      stack.run(pd, order.data(), i, e, j, [&](int64_t b) { return o + order[b] * width; });
    });
  });
}

void tt_last_cpu(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                 const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out, bool /*check_indices*/) {
  const TTShape s = check_tt_items_args("tt_last", prefix, cores, q, r, item_group, item_last, out, "out");
  const auto grp_c = item_group.contiguous();
  const auto last_c = item_last.contiguous();
  const int64_t n = grp_c.numel();
  const int64_t* grp = grp_c.data_ptr<int64_t>();
  const int64_t* last = last_c.data_ptr<int64_t>();
  const int L = s.d - 1;
  check_range("tt_last", "item_group", grp, n, prefix.size(0));
  check_range("tt_last", "item_last", last, n, s.p[L]);
  float* o = out.data_ptr<float>();
  const float* P = prefix.data_ptr<float>();
  const CoreView c = core_view(s, cores);
  const int64_t width = s.prefix_width();
  // Items by group, run by run of one prefix (stage2.h); chunks of the order need no alignment (each item's
  // row has one writer).
  const std::vector<int64_t> order = order_by_group(grp, n, prefix.size(0));
  const Stage2Forward f(s, c);
  at::parallel_for(0, n, kForwardGrain, [&](int64_t lo, int64_t hi) {
    Stage2Scratch w(f);
    for (int64_t i = lo; i < hi;) {
      const int64_t g = grp[order[i]];
      int64_t e = i + 1;
      while (e < hi && grp[order[e]] == g) ++e;
      stage2_items(f, P + g * width, i, e, [&](int64_t k) { return order[k]; }, last, o, w);
      i = e;
    }
  });
}

}  // namespace DLRMBENCH_ISA_NS

}  // namespace dlrmbench
