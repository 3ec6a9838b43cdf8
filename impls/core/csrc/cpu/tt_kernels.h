// The CPU kernels of the TT ops (schemas in ../ops.cpp), declared in namespace dlrmbench::DLRMBENCH_KERNELS_NS
// (default: this build's ISA namespace, isa.h). No include guard: tt_register.cpp declares them once per ISA build
// (cpu/*_avx2.cpp compile the same definitions into isa_avx2 where the native build is AVX-512).
#include <ATen/core/Tensor.h>

#include "isa.h"

#ifndef DLRMBENCH_KERNELS_NS
#define DLRMBENCH_KERNELS_NS DLRMBENCH_ISA_NS
#endif

namespace dlrmbench {
namespace DLRMBENCH_KERNELS_NS {
void tt_prefix_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                   at::Tensor out, bool check_indices);
void tt_last_cpu(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                 const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out, bool check_indices);
void tt_last_backward_cpu(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                          const at::Tensor& item_group, const at::Tensor& item_last, const at::Tensor& grad_items,
                          at::Tensor grad_last_core, at::Tensor grad_prefix, bool check_indices);
void tt_prefix_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                            const at::Tensor& grad_prefix, at::TensorList grad_cores, bool check_indices);
void tt_stages_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                   const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out, bool check_indices,
                   int64_t num_rows);
void tt_stages_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                            const at::Tensor& item_group, const at::Tensor& item_last, const at::Tensor& grad_items,
                            at::TensorList grad_cores, bool check_indices, int64_t num_rows);
void tt_stages_pooled_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& unique,
                          const at::Tensor& prefix_ids, const at::Tensor& group_start,
                          const at::Tensor& count_offsets, const at::Tensor& occ_bags, at::Tensor out,
                          bool per_occurrence);
void tt_stages_backward_pooled_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                   const at::Tensor& unique, const at::Tensor& prefix_ids,
                                   const at::Tensor& group_start, const at::Tensor& count_offsets,
                                   const at::Tensor& occ_bags, const at::Tensor& grad, at::TensorList grad_cores);
}  // namespace DLRMBENCH_KERNELS_NS
}  // namespace dlrmbench

#undef DLRMBENCH_KERNELS_NS
