// Helpers for the CUDA kernels: index range checks that name the first bad entry, launch sizes, key runs
// for deterministic scatter-adds, and a plain-data copy of a TT shape plus core pointers that kernels take
// by value.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/all.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "../tt_args.h"

namespace dlrmbench {

// ValueError naming the op, the tensor and the first entry outside [0, limit) (syncs once; twice on error).
inline void check_range_cuda(const char* op, const char* name, const at::Tensor& t, int64_t limit) {
  if (t.numel() == 0) return;
  auto mm = at::aminmax(t);
  const int64_t lo = std::get<0>(mm).item<int64_t>();
  const int64_t hi = std::get<1>(mm).item<int64_t>();
  if (lo >= 0 && hi < limit) return;
  const auto bad = at::nonzero(at::logical_or(at::lt(t, 0), at::ge(t, limit)));
  const int64_t i = bad[0][0].item<int64_t>();
  TORCH_CHECK_VALUE(false, op, ": ", name, "[", i, "] = ", t[i].item<int64_t>(), " is outside [0, ", limit, ")");
}

inline unsigned blocks_for(int64_t work, int threads) {
  const int64_t b = (work + threads - 1) / threads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(b, 1), 1 << 20));
}

// Entries 0..n-1 of `keys` (int64 in [0, radix)) ordered stably by key, and where each key's run starts: key
// k owns order[start[k] .. start[k+1]). A scatter-add then gives each (key, output element) one thread that
// sums the key's run in this order: no atomics, so the result is the same from run to run.
struct KeyRuns {
  at::Tensor order, start;
};

inline KeyRuns key_runs(const at::Tensor& keys, int64_t radix) {
  const auto sorted = at::sort(keys, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  return {std::get<1>(sorted).contiguous(),
          at::searchsorted(std::get<0>(sorted), at::arange(radix + 1, keys.options())).contiguous()};
}

struct Dims {
  int d;
  int64_t p[4], q[4], r[5], width[4];
  __host__ __device__ int64_t Q(int t) const {
    int64_t v = 1;
    for (int k = 0; k <= t; ++k) v *= q[k];
    return v;
  }
};

struct Cores {
  const float* c[4];
};

struct MutCores {
  float* c[4];
};

inline Dims dims_of(const TTShape& s) {
  Dims d{};
  d.d = s.d;
  for (int k = 0; k < 4; ++k) {
    d.p[k] = s.p[k];
    d.q[k] = s.q[k];
    d.width[k] = k < s.d ? s.core_width(k) : 0;
  }
  for (int k = 0; k < 5; ++k) d.r[k] = s.r[k];
  return d;
}

inline Cores cores_of(const TTShape& s, at::TensorList cores) {
  Cores c{};
  for (int k = 0; k < s.d; ++k) c.c[k] = cores[k].data_ptr<float>();
  return c;
}

}  // namespace dlrmbench
