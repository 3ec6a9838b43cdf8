// CUDA kernels of gather_pool (one thread per (segment, column)) and scatter_add_rows (entries ordered by
// destination, one thread per (destination, column) summing its run in entry order); no atomics, so both
// are deterministic. Schemas in ../ops.cpp.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "../op_args.h"
#include "cuda_util.cuh"

namespace dlrmbench {
namespace {

constexpr int kThreads = 256;

__global__ void gather_pool_kernel(const float* __restrict__ src, const int64_t* __restrict__ idx,
                                   const int64_t* __restrict__ off, int64_t S, int64_t D, float* out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < S * D;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e / D, k = e % D;
    float acc = 0.f;
    for (int64_t j = off[s]; j < off[s + 1]; ++j) acc += src[idx[j] * D + k];
    out[e] += acc;
  }
}

__global__ void scatter_add_kernel(const float* __restrict__ src, const int64_t* __restrict__ si,
                                   const int64_t* __restrict__ order, const int64_t* __restrict__ start,
                                   int64_t rows, int64_t D, float* out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * D;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = e / D, k = e % D;
    if (start[d] == start[d + 1]) continue;
    float acc = 0.f;
    for (int64_t x = start[d]; x < start[d + 1]; ++x) acc += src[si[order[x]] * D + k];
    out[e] += acc;
  }
}

void gather_pool_cuda(const at::Tensor& src, const at::Tensor& index, const at::Tensor& segment_offsets,
                      at::Tensor out, bool check_indices) {
  const char* op = "gather_pool";
  const int64_t S = check_gather_pool_args(src, index, segment_offsets, out);
  const c10::cuda::CUDAGuard guard(src.device());
  const auto idx = index.contiguous();
  const auto off = segment_offsets.contiguous();
  if (check_indices) {  // one sync for the offsets' ends and order, one for the index range
    check_segments_cuda(op, "segment_offsets", off, idx.numel());
    check_range_cuda(op, "index", idx, src.size(0));
  }
  const int64_t D = src.size(1);
  if (S * D == 0) return;
  gather_pool_kernel<<<blocks_for(S * D, kThreads), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<float>(), idx.data_ptr<int64_t>(), off.data_ptr<int64_t>(), S, D, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void scatter_add_rows_cuda(const at::Tensor& src, const at::Tensor& src_index, const at::Tensor& dst_index,
                           at::Tensor out, bool check_indices) {
  const char* op = "scatter_add_rows";
  check_scatter_add_rows_args(src, src_index, dst_index, out);
  const int64_t n = src_index.numel();
  const c10::cuda::CUDAGuard guard(src.device());
  const auto si = src_index.contiguous();
  const auto di = dst_index.contiguous();
  if (check_indices) {
    check_range_cuda(op, "src_index", si, src.size(0));
    check_range_cuda(op, "dst_index", di, out.size(0));
  }
  const int64_t D = src.size(1);
  if (n * D == 0) return;
  const int64_t rows = out.size(0);
  const KeyRuns runs = key_runs(di, rows);
  scatter_add_kernel<<<blocks_for(rows * D, kThreads), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<float>(), si.data_ptr<int64_t>(), runs.order.data_ptr<int64_t>(), runs.start.data_ptr<int64_t>(),
      rows, D, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CUDA, m) {
  m.impl("gather_pool", &gather_pool_cuda);
  m.impl("scatter_add_rows", &scatter_add_rows_cuda);
}

}  // namespace dlrmbench
