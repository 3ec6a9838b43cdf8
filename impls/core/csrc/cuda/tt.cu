// CUDA kernels of the TT stage ops (schemas in ../ops.cpp, layout in ../tt_args.h). The same work as
// the CPU kernels: one block per prefix id for the chained products (a d = 4 chain keeps its one intermediate in
// shared memory), one block per item for the last-core GEMM (the item's prefix row and core slice staged in
// shared memory; operands too large for it fall back to reads from global memory), one thread per gradient
// element in the backward. Gradients shared between lookups (core rows, a group's prefix) are summed without
// atomics: lookups are ordered by destination (cuda_util.cuh: key_runs) and one thread per destination
// element sums its run in that order, so training is bit-identical from run to run. Index arithmetic below the
// row level is 32-bit (one 64-bit division per element). Every index is range-checked in the kernels whatever
// check_indices says (a compare per prefix or item): one outside its range reads zeros, adds nothing and is noted
// in the device's index-error record (../index_errors.h), so no kernel ever reads outside its operands.
#include <ATen/core/Tensor.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/slice.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "../op_args.h"
#include "cuda_util.cuh"

namespace dlrmbench {
namespace {

constexpr int kThreads = 128;
constexpr int kScratchBlocks = 1024;  // blocks of the prefix kernel when its intermediate lives in global memory

// e = row * width + a * inner + b: the row (64-bit), a and b (32-bit; width < 2^31).
__device__ inline int64_t split(int64_t e, int64_t width, int inner, int& a, int& b) {
  const int64_t row = e / width;
  const int rem = static_cast<int>(e - row * width);
  a = rem / inner;
  b = rem - a * inner;
  return row;
}

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

// A prefix id outside [0, prod(p_0..p_{d-2})): noted (by thread 0 of the block that meets it) and skipped.
__device__ inline bool bad_prefix(const Dims& s, int64_t id, int64_t g, int64_t* err, int64_t op) {
  if (id >= 0 && id < s.num_prefixes()) return false;
  if (threadIdx.x == 0) note_bad(err, op * 8 + kPrefixId, g, id, s.num_prefixes());
  return true;
}

// d <= 4: a chain has at most one intermediate (G_0 G_1 when d = 4), of mid floats, in shared memory or, when
// scratch is given, in this block's mid floats of it. A bad prefix id gives a zero row.
__global__ void prefix_kernel(Dims s, Cores c, const int64_t* __restrict__ ids, int64_t G, float* out,
                              int64_t width, float* scratch, int64_t mid, int64_t* err) {
  extern __shared__ float sm[];
  float* buf = scratch != nullptr ? scratch + blockIdx.x * mid : sm;
  for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {
    float* o = out + g * width;
    if (bad_prefix(s, ids[g], g, err, kOpPrefix)) {  // the same branch for the whole block
      for (int64_t e = threadIdx.x; e < width; e += blockDim.x) o[e] = 0.f;
      continue;
    }
    int64_t dg[4];
    prefix_digits(s, ids[g], dg);
    const float* prev = c.c[0] + dg[0] * s.width[0];
    if (s.d == 2) {
      for (int64_t e = threadIdx.x; e < width; e += blockDim.x) o[e] = prev[e];
      __syncthreads();
      continue;
    }
    for (int t = 1; t <= s.d - 2; ++t) {
      float* dst = t == s.d - 2 ? o : buf;
      block_nn(s.Q(t - 1), s.q[t] * s.r[t + 1], s.r[t], prev, c.c[t] + dg[t] * s.width[t], dst);
      prev = dst;
    }
  }
}

// Item i's group in [0, G) and last digit in [0, p_last), else noted (what: op * 8 + kind) and false.
__device__ inline bool item_ok(const Dims& s, int64_t g, int64_t j, int64_t G, int64_t i, int64_t* err, int64_t op) {
  const int64_t pl = s.p[s.d - 1];
  if (g < 0 || g >= G) {
    note_bad(err, op * 8 + kItemGroup, i, g, G);
    return false;
  }
  if (j < 0 || j >= pl) {
    note_bad(err, op * 8 + kItemLast, i, j, pl);
    return false;
  }
  return true;
}

// Item i's row: out[i] (M x qn) = P[grp[i]] (M x r) times G_last[last[i]] (r x qn), one block per item with both
// operands staged in shared memory (sp: M*r floats, sg: r*qn). A bad item gives a zero row.
__global__ void last_kernel(Dims s, const float* __restrict__ P, int64_t width, int64_t G, const float* __restrict__ core,
                            const int64_t* __restrict__ grp, const int64_t* __restrict__ last, int64_t n, float* out,
                            int64_t* err) {
  extern __shared__ float sm[];
  const int L = s.d - 1;
  const int qn = static_cast<int>(s.q[L]), r = static_cast<int>(s.r[L]), D = static_cast<int>(s.Q(L));
  const int W = static_cast<int>(width), S = r * qn;
  float* sp = sm;
  float* sg = sm + W;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    float* o = out + i * D;
    const int64_t gi = grp[i], li = last[i];
    const bool ok = gi >= 0 && gi < G && li >= 0 && li < s.p[L];  // the same for the whole block
    if (!ok) {
      if (threadIdx.x == 0) item_ok(s, gi, li, G, i, err, kOpLast);
      for (int e = threadIdx.x; e < D; e += blockDim.x) o[e] = 0.f;
      continue;
    }
    const float* p = P + gi * width;
    const float* g = core + li * s.width[L];
    for (int e = threadIdx.x; e < W; e += blockDim.x) sp[e] = p[e];
    for (int e = threadIdx.x; e < S; e += blockDim.x) sg[e] = g[e];
    __syncthreads();
    for (int e = threadIdx.x; e < D; e += blockDim.x) {
      const int m = e / qn, col = e - m * qn;
      float acc = 0.f;
      for (int k = 0; k < r; ++k) acc += sp[m * r + k] * sg[k * qn + col];
      o[e] = acc;
    }
    __syncthreads();  // the next item overwrites the staged operands
  }
}

// The same products with the operands read from global memory (one thread per output element), for shapes whose
// operands exceed the shared memory of a block.
__global__ void last_global_kernel(Dims s, const float* __restrict__ P, int64_t width, int64_t G,
                                   const float* __restrict__ core, const int64_t* __restrict__ grp,
                                   const int64_t* __restrict__ last, int64_t n, float* out, int64_t* err) {
  const int L = s.d - 1;
  const int qn = static_cast<int>(s.q[L]), r = static_cast<int>(s.r[L]);
  const int64_t D = s.Q(L);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n * D;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int m, col;
    const int64_t i = split(e, D, qn, m, col);
    if (!item_ok(s, grp[i], last[i], G, i, err, kOpLast)) {
      out[e] = 0.f;
      continue;
    }
    const float* p = P + grp[i] * width + m * r;
    const float* g = core + last[i] * s.width[L] + col;
    float acc = 0.f;
    for (int k = 0; k < r; ++k) acc += p[k] * g[k * qn];
    out[e] = acc;
  }
}

// dP_g (Q x r) = sum over the group's items i (contiguous: gstart[g] .. gstart[g+1]) of dE_i G_last[j_i]^T; an
// item with a bad last digit adds nothing (an item with a bad group is in no group's range).
__global__ void last_bwd_prefix_kernel(Dims s, const float* __restrict__ core, const int64_t* __restrict__ gstart,
                                       const int64_t* __restrict__ last, const float* __restrict__ dE, int64_t G,
                                       float* dP, int64_t width, int64_t* err) {
  const int L = s.d - 1;
  const int64_t qn = s.q[L], r = s.r[L], D = s.Q(L);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < G * width;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int m, k;
    const int64_t g = split(e, width, static_cast<int>(r), m, k);
    float acc = 0.f;
    for (int64_t i = gstart[g]; i < gstart[g + 1]; ++i) {
      if (!item_ok(s, g, last[i], G, i, err, kOpLastBackward)) continue;
      const float* de = dE + i * D + m * qn;
      const float* gl = core + last[i] * s.width[L] + k * qn;
      for (int64_t col = 0; col < qn; ++col) acc += de[col] * gl[col];
    }
    dP[e] = acc;
  }
}

// dG_last[j] (r x qn) += sum over the items with last digit j (run order[start[j] .. start[j+1])) of
// P_g^T (r x Q) * dE_i (Q x qn); an item with a bad group adds nothing (one with a bad last digit is in no run).
__global__ void last_bwd_core_kernel(Dims s, const float* __restrict__ P, int64_t width, int64_t G,
                                     const int64_t* __restrict__ grp, const int64_t* __restrict__ order,
                                     const int64_t* __restrict__ start, const float* __restrict__ dE, float* dG,
                                     int64_t* err) {
  const int L = s.d - 1;
  const int64_t qn = s.q[L], r = s.r[L], D = s.Q(L), M = s.Q(L - 1);
  const int64_t per = r * qn;  // = s.width[L]
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < s.p[L] * per;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int k, col;
    const int64_t j = split(e, per, static_cast<int>(qn), k, col);
    if (start[j] == start[j + 1]) continue;
    float acc = 0.f;
    for (int64_t x = start[j]; x < start[j + 1]; ++x) {
      const int64_t i = order[x];
      if (!item_ok(s, grp[i], j, G, i, err, kOpLastBackward)) continue;
      const float* p = P + grp[i] * width + k;
      const float* de = dE + i * D + col;
      for (int64_t m = 0; m < M; ++m) acc += p[m * r] * de[m * qn];
    }
    dG[e] += acc;
  }
}

// The walk back through the chain, one block per prefix, no shared writes: for t = d-2 .. 1,
// dP_{t-1} = dP_t G_t[i_t]^T into dPs[t-1] (dP_{d-2} is the op's input); for d = 4 also P_1 = G_0 G_1 into
// chain, the left operand of core 2's gradient. A bad prefix id is skipped (its rows are never read).
__global__ void prefix_walk_kernel(Dims s, Cores c, const int64_t* __restrict__ ids, int64_t G,
                                   const float* __restrict__ dPin, int64_t width, MutCores dPs, float* chain,
                                   int64_t* err) {
  for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {
    if (bad_prefix(s, ids[g], g, err, kOpPrefixBackward)) continue;  // the same branch for the whole block
    int64_t dg[4];
    prefix_digits(s, ids[g], dg);
    if (s.d == 4)
      block_nn(s.Q(0), s.q[1] * s.r[2], s.r[1], c.c[0] + dg[0] * s.width[0], c.c[1] + dg[1] * s.width[1],
               chain + g * s.Q(1) * s.r[2]);
    const float* cur = dPin + g * width;
    for (int t = s.d - 2; t >= 1; --t) {
      const int64_t M = s.Q(t - 1), N = s.q[t] * s.r[t + 1], K = s.r[t];
      const float* Gt = c.c[t] + dg[t] * s.width[t];
      float* nxt = dPs.c[t - 1] + g * M * K;
      for (int64_t e = threadIdx.x; e < M * K; e += blockDim.x) {
        const int64_t m = e / K, k = e % K;
        float acc = 0.f;
        for (int64_t nn = 0; nn < N; ++nn) acc += cur[m * N + nn] * Gt[k * N + nn];
        nxt[e] = acc;
      }
      __syncthreads();
      cur = nxt;
    }
  }
}

// dG_t[j] (K x N) += sum over the prefixes with digit t = j (run order[start[j] .. start[j+1])) of
// P_{t-1}^T dP_t; P_0 is core 0's slice, P_1 (d = 4) comes from chain, dP_t from dPt (row stride dPw).
__global__ void prefix_core_grad_kernel(Dims s, Cores c, int t, const int64_t* __restrict__ ids,
                                        const int64_t* __restrict__ order, const int64_t* __restrict__ start,
                                        const float* __restrict__ chain, const float* __restrict__ dPt, int64_t dPw,
                                        float* dG) {
  const int64_t M = s.Q(t - 1), N = s.q[t] * s.r[t + 1], K = s.r[t];
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < s.p[t] * K * N;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int k, nn;
    const int64_t j = split(e, K * N, static_cast<int>(N), k, nn);
    if (start[j] == start[j + 1]) continue;
    float acc = 0.f;
    for (int64_t x = start[j]; x < start[j + 1]; ++x) {
      const int64_t g = order[x];
      if (ids[g] < 0 || ids[g] >= s.num_prefixes()) continue;  // noted by the walk; its digit was wrapped
      int64_t dg[4];
      prefix_digits(s, ids[g], dg);
      const float* Pp = t == 1 ? c.c[0] + dg[0] * s.width[0] : chain + g * M * K;
      const float* d = dPt + g * dPw;
      for (int64_t m = 0; m < M; ++m) acc += Pp[m * K + k] * d[m * N + nn];
    }
    dG[e] += acc;
  }
}

// dG_0[j] += sum of dP_0 over the prefixes with first digit j, in run order (bad prefix ids skipped).
__global__ void core0_grad_kernel(Dims s, int64_t rows, int64_t w0, const int64_t* __restrict__ ids,
                                  const int64_t* __restrict__ order, const int64_t* __restrict__ start,
                                  const float* __restrict__ dP0, float* dG0) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * w0;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e / w0;
    const int64_t k = e - j * w0;
    if (start[j] == start[j + 1]) continue;
    float acc = 0.f;
    for (int64_t x = start[j]; x < start[j + 1]; ++x) {
      const int64_t g = order[x];
      if (ids[g] >= 0 && ids[g] < s.num_prefixes()) acc += dP0[g * w0 + k];
    }
    dG0[e] += acc;
  }
}

// The shared memory a block of `kernel` may use beyond the default 48 KB is granted on request, up to the
// device's opt-in limit; false when `bytes` exceed even that (the caller takes its global-memory path).
template <typename K>
bool fits_smem(K kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return true;
  int device = 0, limit = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit)) return false;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return true;
}

void tt_prefix_cuda(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                    at::Tensor out, bool check_indices) {
  const TTShape s = check_tt_prefix_args(cores, q, r, prefix_ids, out);
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto ids = prefix_ids.contiguous();
  if (check_indices) check_range_cuda("tt_prefix", "prefix_ids", ids, s.num_prefixes());
  const int64_t G = ids.numel();
  if (G == 0) return;
  const int64_t mid = s.d == 4 ? s.Q(1) * s.r[2] : 0;  // the one intermediate of a d = 4 chain
  size_t smem = sizeof(float) * mid;
  unsigned blocks = blocks_for(G, 1);
  at::Tensor scratch;
  if (!fits_smem(prefix_kernel, smem)) {  // too large for a block's shared memory: a global buffer per block
    blocks = std::min<unsigned>(blocks, kScratchBlocks);
    scratch = at::empty({static_cast<int64_t>(blocks), mid}, out.options());
    smem = 0;
  }
  prefix_kernel<<<blocks, kThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
      dims_of(s), cores_of(s, cores), ids.data_ptr<int64_t>(), G, out.data_ptr<float>(), s.prefix_width(),
      scratch.defined() ? scratch.data_ptr<float>() : nullptr, mid, error_record_of(out));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void tt_last_cuda(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                  const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out, bool check_indices) {
  const char* op = "tt_last";
  const TTShape s = check_tt_items_args(op, prefix, cores, q, r, item_group, item_last, out, "out");
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto grp = item_group.contiguous();
  const auto last = item_last.contiguous();
  if (check_indices) {
    check_range_cuda(op, "item_group", grp, prefix.size(0));
    check_range_cuda(op, "item_last", last, s.p[s.d - 1]);
  }
  const int64_t n = grp.numel(), D = s.dim();
  if (n == 0) return;
  const int L = s.d - 1;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const size_t smem = sizeof(float) * (s.prefix_width() + s.r[L] * s.q[L]);
  if (fits_smem(last_kernel, smem)) {
    // a warp per 32 output columns (one to four warps): the block stages the operands, then each thread sums
    const int threads = static_cast<int>(std::min<int64_t>(kThreads, std::max<int64_t>(32, (D + 31) / 32 * 32)));
    last_kernel<<<blocks_for(n, 1), threads, smem, stream>>>(
        dims_of(s), prefix.data_ptr<float>(), s.prefix_width(), prefix.size(0), cores[L].data_ptr<float>(),
        grp.data_ptr<int64_t>(), last.data_ptr<int64_t>(), n, out.data_ptr<float>(), error_record_of(out));
  } else {
    last_global_kernel<<<blocks_for(n * D, kThreads), kThreads, 0, stream>>>(
        dims_of(s), prefix.data_ptr<float>(), s.prefix_width(), prefix.size(0), cores[L].data_ptr<float>(),
        grp.data_ptr<int64_t>(), last.data_ptr<int64_t>(), n, out.data_ptr<float>(), error_record_of(out));
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void tt_last_backward_cuda(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                           const at::Tensor& item_group, const at::Tensor& item_last, const at::Tensor& grad_items,
                           at::Tensor grad_last_core, at::Tensor grad_prefix, bool check_indices) {
  const char* op = "tt_last_backward";
  const TTShape s = check_tt_last_backward_args(prefix, cores, q, r, item_group, item_last, grad_items,
                                                grad_last_core, grad_prefix);
  const int L = s.d - 1;
  const int64_t n = item_group.numel();
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto grp = item_group.contiguous();
  const auto last = item_last.contiguous();
  const int64_t G = prefix.size(0);
  if (check_indices) {
    check_range_cuda(op, "item_group", grp, G);
    check_range_cuda(op, "item_last", last, s.p[L]);
    check_sorted_cuda(op, "item_group", grp);
  }
  const int64_t width = s.prefix_width();
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const Dims d = dims_of(s);
  const auto gstart = at::searchsorted(grp, at::arange(G + 1, grp.options())).contiguous();
  if (G > 0) {
    last_bwd_prefix_kernel<<<blocks_for(G * width, kThreads), kThreads, 0, stream>>>(
        d, cores[L].data_ptr<float>(), gstart.data_ptr<int64_t>(), last.data_ptr<int64_t>(),
        grad_items.data_ptr<float>(), G, grad_prefix.data_ptr<float>(), width, error_record_of(grad_prefix));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  if (n == 0) return;
  const KeyRuns runs = key_runs(last, s.p[L]);
  last_bwd_core_kernel<<<blocks_for(s.p[L] * s.core_width(L), kThreads), kThreads, 0, stream>>>(
      d, prefix.data_ptr<float>(), width, G, grp.data_ptr<int64_t>(), runs.order.data_ptr<int64_t>(),
      runs.start.data_ptr<int64_t>(), grad_items.data_ptr<float>(), grad_last_core.data_ptr<float>(),
      error_record_of(grad_prefix));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void tt_prefix_backward_cuda(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                             const at::Tensor& grad_prefix, at::TensorList grad_cores, bool check_indices) {
  const char* op = "tt_prefix_backward";
  const TTShape s = check_tt_prefix_backward_args(cores, q, r, prefix_ids, grad_prefix, grad_cores);
  const c10::cuda::CUDAGuard guard(cores[0].device());
  const auto ids = prefix_ids.contiguous();
  const int64_t G = ids.numel();
  if (check_indices) check_range_cuda(op, "prefix_ids", ids, s.num_prefixes());
  if (G == 0) return;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const Dims d = dims_of(s);
  const Cores c = cores_of(s, cores);
  const int64_t width = s.prefix_width();
  const float* dPin = grad_prefix.data_ptr<float>();
  // dP_t of every prefix for t < d-2 (dPs), and P_1 for d = 4 (chain).
  std::vector<at::Tensor> keep;
  MutCores dPs{};
  for (int t = 0; t < s.d - 2; ++t) {
    keep.push_back(at::empty({G, s.Q(t) * s.r[t + 1]}, grad_prefix.options()));
    dPs.c[t] = keep.back().data_ptr<float>();
  }
  at::Tensor chain = at::empty({s.d == 4 ? G : 0, s.Q(1) * s.r[2]}, grad_prefix.options());
  if (s.d > 2) {
    prefix_walk_kernel<<<blocks_for(G, 1), kThreads, 0, stream>>>(d, c, ids.data_ptr<int64_t>(), G, dPin, width, dPs,
                                                                  chain.data_ptr<float>(), error_record_of(ids));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // Digit t of each prefix id, then per core the run-ordered sums.
  auto digit = [&](int t) {
    int64_t stride = 1;
    for (int k = t + 1; k < s.d - 1; ++k) stride *= s.p[k];
    return at::remainder(at::floor_divide(ids, stride), s.p[t]).contiguous();
  };
  for (int t = 1; t <= s.d - 2; ++t) {
    const KeyRuns runs = key_runs(digit(t), s.p[t]);
    const float* dPt = t == s.d - 2 ? dPin : dPs.c[t];
    const int64_t dPw = s.Q(t) * s.r[t + 1];
    prefix_core_grad_kernel<<<blocks_for(s.p[t] * s.core_width(t), kThreads), kThreads, 0, stream>>>(
        d, c, t, ids.data_ptr<int64_t>(), runs.order.data_ptr<int64_t>(), runs.start.data_ptr<int64_t>(),
        chain.data_ptr<float>(), dPt, dPw, grad_cores[t].data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const KeyRuns runs = key_runs(digit(0), s.p[0]);
  const float* dP0 = s.d == 2 ? dPin : dPs.c[0];
  core0_grad_kernel<<<blocks_for(s.p[0] * s.core_width(0), kThreads), kThreads, 0, stream>>>(
      d, s.p[0], s.core_width(0), ids.data_ptr<int64_t>(), runs.order.data_ptr<int64_t>(),
      runs.start.data_ptr<int64_t>(), dP0, grad_cores[0].data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The fused op's rows against the table's rows, noted not raised (its caller skips checks; no sync).
__global__ void bad_rows_kernel(const int64_t* __restrict__ ids, int64_t G, const int64_t* __restrict__ grp,
                                const int64_t* __restrict__ last, int64_t n, int64_t p_last, int64_t num_rows,
                                int64_t* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t g = grp[i];
    if (g < 0 || g >= G) continue;  // tt_last notes it
    const int64_t row = ids[g] * p_last + last[i];
    if (row < 0 || row >= num_rows) note_bad(err, kOpStages * 8 + kItemRow, i, row, num_rows);
  }
}

}  // namespace

void note_bad_rows_cuda(const at::Tensor& prefix_ids, const at::Tensor& item_group, const at::Tensor& item_last,
                        int64_t p_last, int64_t num_rows) {
  const int64_t n = item_group.numel();
  if (n == 0) return;
  const c10::cuda::CUDAGuard guard(item_group.device());
  const auto ids = prefix_ids.contiguous(), grp = item_group.contiguous(), last = item_last.contiguous();
  bad_rows_kernel<<<blocks_for(n, kThreads), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      ids.data_ptr<int64_t>(), ids.numel(), grp.data_ptr<int64_t>(), last.data_ptr<int64_t>(), n, p_last, num_rows,
      error_record_of(grp));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

TORCH_LIBRARY_IMPL(dlrmbench, CUDA, m) {
  m.impl("tt_prefix", &tt_prefix_cuda);
  m.impl("tt_last", &tt_last_cuda);
  m.impl("tt_last_backward", &tt_last_backward_cuda);
  m.impl("tt_prefix_backward", &tt_prefix_backward_cuda);
}

}  // namespace dlrmbench
