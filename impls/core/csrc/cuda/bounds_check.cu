// CUDA kernel of dlrmbench::bounds_check (schema and result codes in ../ops.cpp). One thread per bag
// finds whether its bag has decreasing offsets or a bad id; atomicMin keeps the lowest such bag; one copy brings
// those two bags and the first and last offsets to the host (the only sync of a valid batch), which fills in the
// details of a bad bag alone, so the result equals the CPU kernel's.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>

namespace dlrmbench {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

__global__ void lowest_bad_bags(const int64_t* __restrict__ v, const int64_t* __restrict__ o,
                                const int64_t* __restrict__ rows, int64_t batch_size, int64_t nbags,
                                int64_t nnz, unsigned long long* bad_offsets, unsigned long long* bad_ids) {
  const int64_t bag = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (bag >= nbags) return;
  int64_t lo = o[bag], hi = o[bag + 1];
  if (hi < lo) {
    atomicMin(bad_offsets, static_cast<unsigned long long>(bag));
    return;
  }
  lo = lo < 0 ? 0 : lo;
  hi = hi > nnz ? nnz : hi;
  const int64_t n = rows[bag / batch_size];
  for (int64_t p = lo; p < hi; ++p) {
    const int64_t id = v[p];
    if (id < 0 || id >= n) {
      atomicMin(bad_ids, static_cast<unsigned long long>(bag));
      return;
    }
  }
}

at::Tensor bounds_check_cuda(const at::Tensor& values, const at::Tensor& offsets, const at::Tensor& table_rows,
                             int64_t batch_size) {
  TORCH_CHECK_VALUE(values.scalar_type() == at::kLong && offsets.scalar_type() == at::kLong &&
                        table_rows.scalar_type() == at::kLong,
                    "bounds_check: values, offsets and table_rows must be int64");
  TORCH_CHECK_VALUE(offsets.device() == values.device() && table_rows.device() == values.device(),
                    "bounds_check: values, offsets and table_rows must be on one device; they are on ",
                    values.device(), ", ", offsets.device(), ", ", table_rows.device());
  TORCH_CHECK_VALUE(batch_size > 0, "bounds_check: batch_size must be > 0, got ", batch_size);
  const int64_t T = table_rows.numel();
  const int64_t nbags = T * batch_size;
  TORCH_CHECK_VALUE(offsets.numel() == nbags + 1, "bounds_check: offsets has ", offsets.numel(),
                    " entries, expected T*B+1 = ", nbags + 1);
  const c10::cuda::CUDAGuard guard(values.device());
  const auto v = values.contiguous();
  const auto o = offsets.contiguous();
  const auto r = table_rows.contiguous();
  const int64_t nnz = values.numel();
  // [lowest bag with decreasing offsets, lowest bag with a bad id, offsets[0], offsets[T*B]]: one copy to the host
  auto flags = at::full({4}, kNone, offsets.options());
  flags.slice(0, 2, 3).copy_(o.slice(0, 0, 1));
  flags.slice(0, 3, 4).copy_(o.slice(0, nbags, nbags + 1));
  auto* f = reinterpret_cast<unsigned long long*>(flags.data_ptr<int64_t>());
  if (nbags > 0) {
    const int threads = 256;
    const auto blocks = static_cast<unsigned>((nbags + threads - 1) / threads);
    lowest_bad_bags<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        v.data_ptr<int64_t>(), o.data_ptr<int64_t>(), r.data_ptr<int64_t>(), batch_size, nbags, nnz, f, f + 1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const auto fl = flags.cpu();  // the one sync of a valid batch
  const int64_t* h = fl.data_ptr<int64_t>();
  const int64_t bad_offset_bag = h[0], bad_id_bag = h[1], first = h[2], last = h[3];
  int64_t res[5] = {0, -1, -1, -1, 0};
  auto set = [&](int64_t code, int64_t bag, int64_t pos, int64_t val) {  // bag -1: no table (T = 0)
    res[0] = code;
    res[1] = bag < 0 ? -1 : bag / batch_size;
    res[2] = bag < 0 ? -1 : bag % batch_size;
    res[3] = pos;
    res[4] = val;
  };
  if (first != 0) {
    set(1, nbags > 0 ? 0 : -1, 0, first);
  } else if (bad_offset_bag != kNone) {
    set(2, bad_offset_bag, bad_offset_bag + 1, o[bad_offset_bag + 1].item<int64_t>());
  } else if (last != nnz) {
    set(3, nbags - 1, nbags, last);
  } else if (bad_id_bag != kNone) {  // the details of that one bag, on the host
    const auto bag_off = o.slice(0, bad_id_bag, bad_id_bag + 2).cpu();
    const int64_t lo = bag_off.data_ptr<int64_t>()[0], hi = bag_off.data_ptr<int64_t>()[1];
    const auto ids = v.slice(0, lo, hi).cpu();
    const int64_t n = r[bad_id_bag / batch_size].item<int64_t>();
    const int64_t* p = ids.data_ptr<int64_t>();
    for (int64_t k = 0; k < hi - lo; ++k) {
      if (p[k] < 0 || p[k] >= n) {
        set(p[k] < 0 ? 4 : 5, bad_id_bag, lo + k, p[k]);
        break;
      }
    }
  }
  auto out = at::empty({5}, offsets.options().device(at::kCPU));
  std::copy(res, res + 5, out.data_ptr<int64_t>());
  return out.to(values.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CUDA, m) { m.impl("bounds_check", &bounds_check_cuda); }

}  // namespace dlrmbench
