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

// The fused stages over a batch's unique ids (EcoRec's step): the items are the ascending unique ids, in groups
// of one prefix each (group x: prefix id prefix_ids[x], items group_start[x] .. group_start[x + 1]; an item's last
// digit is its id less prefix * p_last), unique k's occurrences count_offsets[k] .. count_offsets[k + 1], their bags
// occ_bags[..]. Forward: every row added into out [B, D] (zeroed) at the bag of each occurrence. Backward: every
// item's gradient the sum of grad [B, D] over its occurrences' bags, walked back into grad_cores. Inputs as
// ecorec_forward made them (contiguous, in range, checked there); deterministic for any thread count.
// per_occurrence (EL-Rec's forward): the forward makes stage 2 once per occurrence, each into its bag.
void tt_stages_pooled_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                   const at::Tensor& unique, const at::Tensor& prefix_ids,
                                   const at::Tensor& group_start, const at::Tensor& count_offsets,
                                   const at::Tensor& occ_bags, at::Tensor out, bool per_occurrence = false);
void tt_stages_backward_pooled_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                            const at::Tensor& unique, const at::Tensor& prefix_ids,
                                            const at::Tensor& group_start, const at::Tensor& count_offsets,
                                            const at::Tensor& occ_bags, const at::Tensor& grad,
                                            at::TensorList grad_cores);

}  // namespace dlrmbench
