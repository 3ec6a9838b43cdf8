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
#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "../index_errors.h"
#include "../tt_args.h"

namespace dlrmbench {

// Index checks of the CUDA kernels, each one host-device sync (more only on the error path). An op skips them when
// its caller passes check_indices=False (indices derived from a batch validated at the step's boundary).

// ValueError naming the op, the tensor and the first entry outside [0, limit).
inline void check_range_cuda(const char* op, const char* name, const at::Tensor& t, int64_t limit) {
  if (t.numel() == 0) return;
  const auto mm = at::aminmax(t);
  const auto host = at::stack({std::get<0>(mm), std::get<1>(mm)}).cpu();  // the one sync
  const int64_t lo = host.data_ptr<int64_t>()[0], hi = host.data_ptr<int64_t>()[1];
  if (lo >= 0 && hi < limit) return;
  const auto bad = at::nonzero(at::logical_or(at::lt(t, 0), at::ge(t, limit)));
  const int64_t i = bad[0][0].item<int64_t>();
  TORCH_CHECK_VALUE(false, op, ": ", name, "[", i, "] = ", t[i].item<int64_t>(), " is outside [0, ", limit, ")");
}

// Segment offsets [S+1] that run from 0 to n and never decrease.
inline void check_segments_cuda(const char* op, const char* name, const at::Tensor& off, int64_t n) {
  const int64_t S = off.numel() - 1;
  const auto sorted = S > 0 ? at::all(at::ge(off.slice(0, 1), off.slice(0, 0, S))).to(at::kLong).view({1})
                            : at::ones({1}, off.options());
  const auto host = at::cat({off.slice(0, 0, 1), off.slice(0, S, S + 1), sorted}).cpu();  // the one sync
  const int64_t* h = host.data_ptr<int64_t>();
  TORCH_CHECK_VALUE(h[0] == 0 && h[1] == n, op, ": ", name, " must run from 0 to len(index) = ", n, ", got ", h[0],
                    " .. ", h[1]);
  TORCH_CHECK_VALUE(h[2] != 0, op, ": ", name, " decrease");
}

// Item groups that never decrease (the items of a group contiguous).
inline void check_sorted_cuda(const char* op, const char* name, const at::Tensor& t) {
  const int64_t n = t.numel();
  if (n < 2) return;
  const bool sorted = at::all(at::ge(t.slice(0, 1), t.slice(0, 0, n - 1))).item<bool>();  // the one sync
  TORCH_CHECK_VALUE(sorted, op, ": ", name, " must be non-decreasing (items of a group contiguous)");
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
  __host__ __device__ int64_t num_prefixes() const {
    int64_t v = 1;
    for (int k = 0; k < d - 1; ++k) v *= p[k];
    return v;
  }
};

// An unchecked index found outside its range (index_errors.h): the first thread to find one fills the record.
__device__ inline void note_bad(int64_t* rec, int64_t what, int64_t pos, int64_t value, int64_t limit) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(rec), 0ull, static_cast<unsigned long long>(what)) == 0ull) {
    rec[1] = pos;
    rec[2] = value;
    rec[3] = limit;
  }
}

inline int64_t* error_record_of(const at::Tensor& t) { return index_error_record(t.device()).data_ptr<int64_t>(); }

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
