// transpose_segments on a GPU, composed of ATen ops: one gather whose index is every segment's source range,
// listed in (s, g) order (the CPU kernel copies segment by segment; cpu/transpose_segments.cpp).
#include <ATen/ATen.h>

#include "composed.h"
#include "op_args.h"

namespace dlrmbench {
namespace {

at::Tensor transpose_segments_composed(const at::Tensor& values, const at::Tensor& lengths) {
  const char* op = "transpose_segments";
  check_transpose_segments_args(op, values, lengths);
  const int64_t n = values.numel();
  TORCH_CHECK_VALUE(lengths.numel() == 0 || lengths.min().item<int64_t>() >= 0, op, ": a length is negative");
  const at::Tensor flat = lengths.reshape({-1});
  TORCH_CHECK_VALUE(flat.sum().item<int64_t>() == n, op, ": lengths add up to ", flat.sum().item<int64_t>(),
                    " but values has ", n, " entries");
  if (n == 0) return values.clone();
  const at::Tensor start = (at::cumsum(flat, 0) - flat).view(lengths.sizes()).t().reshape({-1});
  const at::Tensor len_t = lengths.t().reshape({-1});
  const at::Tensor seg = at::repeat_interleave(at::arange(len_t.numel(), lengths.options()), len_t, 0, n);
  const at::Tensor seg_start = at::cumsum(len_t, 0) - len_t;
  const at::Tensor index = (start - seg_start).index_select(0, seg) + at::arange(n, lengths.options());
  return values.contiguous().index_select(0, index);
}

}  // namespace

DLRMBENCH_COMPOSED("transpose_segments", transpose_segments_composed)

}  // namespace dlrmbench
