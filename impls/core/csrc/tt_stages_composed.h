// tt_stages and tt_stages_backward as a sequence of the per-stage ops (called through the dispatcher, so each
// backend's own stage kernels run): the CUDA kernels of the fused ops, and the CPU backward for d = 4, whose
// walk re-sorts the prefixes per core and so cannot stay in one pass.
#pragma once

#include <ATen/core/Tensor.h>

namespace dlrmbench {

void tt_stages_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                        const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out,
                        bool check_indices, int64_t num_rows);

void tt_stages_backward_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                 const at::Tensor& prefix_ids, const at::Tensor& item_group,
                                 const at::Tensor& item_last, const at::Tensor& grad_items,
                                 at::TensorList grad_cores, bool check_indices, int64_t num_rows);

}  // namespace dlrmbench
