// CUDA kernels of the TT stage ops (schemas in ../ops.cpp, layout in ../tt_args.h). The same work as
// the CPU kernels: one block per prefix id for the chained products (intermediates in shared memory),
// one thread per output element of the last-core GEMMs, atomicAdd into core and prefix gradients.
// Correctness first: each output element is a dot product read straight from global memory.
#include <ATen/core/Tensor.h>
#include <ATen/ops/all.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/slice.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "../op_args.h"
#include "cuda_util.cuh"

namespace dlrmbench {
namespace {

constexpr int kThreads = 128;

__device__ inline void prefix_digits(const Dims& s, int64_t g, int64_t* dg) {
  for (int k = s.d - 2; k >= 0; --k) {
    dg[k] = g % s.p[k];
    g /= s.p[k];
  }
}

// dst[M x N] = A[M x K] * B[K x N] by the whole block.
__device__ inline void block_nn(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* dst) {
  for (int64_t e = threadIdx.x; e < M * N; e += blockDim.x) {
    const int64_t m = e / N, n = e % N;
    float acc = 0.f;
    for (int64_t k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
    dst[e] = acc;
  }
  __syncthreads();
}

__global__ void prefix_kernel(Dims s, Cores c, const int64_t* __restrict__ ids, int64_t G, float* out,
                              int64_t width, int64_t smw) {
  extern __shared__ float sm[];
  for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {
    int64_t dg[4];
    prefix_digits(s, ids[g], dg);
    const float* prev = c.c[0] + dg[0] * s.width[0];
    float* o = out + g * width;
    if (s.d == 2) {
      for (int64_t e = threadIdx.x; e < width; e += blockDim.x) o[e] = prev[e];
      __syncthreads();
      continue;
    }
    for (int t = 1; t <= s.d - 2; ++t) {
      float* dst = t == s.d - 2 ? o : sm + (t % 2) * smw;
      block_nn(s.Q(t - 1), s.q[t] * s.r[t + 1], s.r[t], prev, c.c[t] + dg[t] * s.width[t], dst);
      prev = dst;
    }
  }
}

__global__ void last_kernel(Dims s, const float* __restrict__ P, int64_t width, const float* __restrict__ core,
                            const int64_t* __restrict__ grp, const int64_t* __restrict__ last, int64_t n, float* out) {
  const int L = s.d - 1;
  const int64_t D = s.Q(L), qn = s.q[L], r = s.r[L];
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n * D;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / D, m = (e % D) / qn, col = e % qn;
    const float* p = P + grp[i] * width + m * r;
    const float* g = core + last[i] * s.width[L] + col;
    float acc = 0.f;
    for (int64_t k = 0; k < r; ++k) acc += p[k] * g[k * qn];
    out[e] = acc;
  }
}

// dP[grp[i]] (Q x r) += dE_i (Q x qn) * G_last[j]^T
__global__ void last_bwd_prefix_kernel(Dims s, const float* __restrict__ core, const int64_t* __restrict__ grp,
                                       const int64_t* __restrict__ last, const float* __restrict__ dE, int64_t n,
                                       float* dP, int64_t width) {
  const int L = s.d - 1;
  const int64_t qn = s.q[L], r = s.r[L], D = s.Q(L);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n * width;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / width, m = (e % width) / r, k = e % r;
    const float* de = dE + i * D + m * qn;
    const float* g = core + last[i] * s.width[L] + k * qn;
    float acc = 0.f;
    for (int64_t col = 0; col < qn; ++col) acc += de[col] * g[col];
    atomicAdd(dP + grp[i] * width + m * r + k, acc);
  }
}

// dG_last[j] (r x qn) += P_g^T (r x Q) * dE_i (Q x qn)
__global__ void last_bwd_core_kernel(Dims s, const float* __restrict__ P, int64_t width,
                                     const int64_t* __restrict__ grp, const int64_t* __restrict__ last,
                                     const float* __restrict__ dE, int64_t n, float* dG) {
  const int L = s.d - 1;
  const int64_t qn = s.q[L], r = s.r[L], D = s.Q(L), M = s.Q(L - 1);
  const int64_t per = r * qn;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n * per;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / per, k = (e % per) / qn, col = e % qn;
    const float* p = P + grp[i] * width + k;
    const float* de = dE + i * D + col;
    float acc = 0.f;
    for (int64_t m = 0; m < M; ++m) acc += p[m * r] * de[m * qn];
    atomicAdd(dG + last[i] * s.width[L] + k * qn + col, acc);
  }
}

__global__ void prefix_bwd_kernel(Dims s, Cores c, MutCores dG, const int64_t* __restrict__ ids, int64_t G,
                                  const float* __restrict__ dPin, int64_t width, int64_t smw) {
  extern __shared__ float sm[];
  float* chain = sm;  // P_1 (d = 4)
  float* buf[2] = {sm + smw, sm + 2 * smw};
  for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {
    int64_t dg[4];
    prefix_digits(s, ids[g], dg);
    if (s.d == 4)
      block_nn(s.Q(0), s.q[1] * s.r[2], s.r[1], c.c[0] + dg[0] * s.width[0], c.c[1] + dg[1] * s.width[1], chain);
    const float* cur = dPin + g * width;
    for (int t = s.d - 2; t >= 1; --t) {
      const int64_t M = s.Q(t - 1), N = s.q[t] * s.r[t + 1], K = s.r[t];
      const float* Pp = t == 1 ? c.c[0] + dg[0] * s.width[0] : chain;
      const float* Gt = c.c[t] + dg[t] * s.width[t];
      float* dGt = dG.c[t] + dg[t] * s.width[t];
      for (int64_t e = threadIdx.x; e < K * N; e += blockDim.x) {  // dG_t += P_{t-1}^T dP_t
        const int64_t k = e / N, nn = e % N;
        float acc = 0.f;
        for (int64_t m = 0; m < M; ++m) acc += Pp[m * K + k] * cur[m * N + nn];
        atomicAdd(dGt + e, acc);
      }
      float* nxt = buf[t % 2];
      for (int64_t e = threadIdx.x; e < M * K; e += blockDim.x) {  // dP_{t-1} = dP_t G_t^T
        const int64_t m = e / K, k = e % K;
        float acc = 0.f;
        for (int64_t nn = 0; nn < N; ++nn) acc += cur[m * N + nn] * Gt[k * N + nn];
        nxt[e] = acc;
      }
      __syncthreads();
      cur = nxt;
    }
    float* dG0 = dG.c[0] + dg[0] * s.width[0];
    for (int64_t e = threadIdx.x; e < s.width[0]; e += blockDim.x) atomicAdd(dG0 + e, cur[e]);
    __syncthreads();
  }
}

template <typename K>
void set_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
}

void tt_prefix_cuda(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                    at::Tensor out) {
  const TTShape s = check_tt_prefix_args(cores, q, r, prefix_ids, out);
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto ids = prefix_ids.contiguous();
  check_range_cuda("tt_prefix", "prefix_ids", ids, s.num_prefixes());
  const int64_t G = ids.numel();
  if (G == 0) return;
  const int64_t smw = s.max_chain_width();
  const size_t smem = sizeof(float) * 2 * smw;
  set_smem(prefix_kernel, smem);
  prefix_kernel<<<blocks_for(G, 1), kThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
      dims_of(s), cores_of(s, cores), ids.data_ptr<int64_t>(), G, out.data_ptr<float>(), s.prefix_width(), smw);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void tt_last_cuda(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                  const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out) {
  const char* op = "tt_last";
  const TTShape s = check_tt_items_args(op, prefix, cores, q, r, item_group, item_last, out, "out");
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto grp = item_group.contiguous();
  const auto last = item_last.contiguous();
  check_range_cuda(op, "item_group", grp, prefix.size(0));
  check_range_cuda(op, "item_last", last, s.p[s.d - 1]);
  const int64_t n = grp.numel(), D = s.dim();
  if (n == 0) return;
  last_kernel<<<blocks_for(n * D, kThreads), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      dims_of(s), prefix.data_ptr<float>(), s.prefix_width(), cores[s.d - 1].data_ptr<float>(),
      grp.data_ptr<int64_t>(), last.data_ptr<int64_t>(), n, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void tt_last_backward_cuda(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                           const at::Tensor& item_group, const at::Tensor& item_last, const at::Tensor& grad_items,
                           at::Tensor grad_last_core, at::Tensor grad_prefix) {
  const char* op = "tt_last_backward";
  const TTShape s = check_tt_last_backward_args(prefix, cores, q, r, item_group, item_last, grad_items,
                                                grad_last_core, grad_prefix);
  const int L = s.d - 1;
  const int64_t n = item_group.numel();
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto grp = item_group.contiguous();
  const auto last = item_last.contiguous();
  const int64_t G = prefix.size(0);
  check_range_cuda(op, "item_group", grp, G);
  check_range_cuda(op, "item_last", last, s.p[L]);
  if (n > 1) {
    const bool sorted = at::all(at::ge(grp.slice(0, 1), grp.slice(0, 0, n - 1))).item<bool>();
    TORCH_CHECK_VALUE(sorted, op, ": item_group must be non-decreasing (items of a group contiguous)");
  }
  const int64_t width = s.prefix_width();
  grad_prefix.zero_();
  if (n == 0) return;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const Dims d = dims_of(s);
  last_bwd_prefix_kernel<<<blocks_for(n * width, kThreads), kThreads, 0, stream>>>(
      d, cores[L].data_ptr<float>(), grp.data_ptr<int64_t>(), last.data_ptr<int64_t>(), grad_items.data_ptr<float>(),
      n, grad_prefix.data_ptr<float>(), width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  last_bwd_core_kernel<<<blocks_for(n * s.core_width(L), kThreads), kThreads, 0, stream>>>(
      d, prefix.data_ptr<float>(), width, grp.data_ptr<int64_t>(), last.data_ptr<int64_t>(),
      grad_items.data_ptr<float>(), n, grad_last_core.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void tt_prefix_backward_cuda(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                             const at::Tensor& grad_prefix, at::TensorList grad_cores) {
  const char* op = "tt_prefix_backward";
  const TTShape s = check_tt_prefix_backward_args(cores, q, r, prefix_ids, grad_prefix, grad_cores);
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto ids = prefix_ids.contiguous();
  const int64_t G = ids.numel();
  check_range_cuda(op, "prefix_ids", ids, s.num_prefixes());
  MutCores dG{};
  for (int k = 0; k < s.d - 1; ++k) dG.c[k] = grad_cores[k].data_ptr<float>();
  if (G == 0) return;
  const int64_t smw = s.max_chain_width();
  const size_t smem = sizeof(float) * 3 * smw;
  set_smem(prefix_bwd_kernel, smem);
  prefix_bwd_kernel<<<blocks_for(G, 1), kThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
      dims_of(s), cores_of(s, cores), dG, ids.data_ptr<int64_t>(), G, grad_prefix.data_ptr<float>(), s.prefix_width(),
      smw);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CUDA, m) {
  m.impl("tt_prefix", &tt_prefix_cuda);
  m.impl("tt_last", &tt_last_cuda);
  m.impl("tt_last_backward", &tt_last_backward_cuda);
  m.impl("tt_prefix_backward", &tt_prefix_backward_cuda);
}

}  // namespace dlrmbench
