// CPU kernels that other CPU kernels call directly (no dispatcher round trip): the fused TT stages in the ISA build
// that set_cpu_isa chose (tt_register.cpp). Schemas and contracts in ../ops.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace dlrmbench {

void tt_stages_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                            const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out,
                            bool check_indices, int64_t num_rows);

void tt_stages_backward_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                     const at::Tensor& prefix_ids, const at::Tensor& item_group,
                                     const at::Tensor& item_last, const at::Tensor& grad_items,
                                     at::TensorList grad_cores, bool check_indices, int64_t num_rows);

}  // namespace dlrmbench
