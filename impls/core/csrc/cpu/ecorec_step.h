// EcoRec's table step on the CPU (ecorec_step.cpp), for the ops that run it over several tables in one call
// (ecorec_tables.cpp). Schemas and contracts of ecorec_forward / ecorec_backward in ../ops.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <tuple>

namespace dlrmbench {

// (out, unique, count_offsets, occ_bags, chunk_bounds, chunk_groups)
using EcoRecForward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

EcoRecForward ecorec_forward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& values,
                                 const at::Tensor& offsets, int64_t batch_size, int64_t micro_batches,
                                 int64_t min_chunk, int64_t num_rows);

void ecorec_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& unique,
                         const at::Tensor& count_offsets, const at::Tensor& occ_bags, const at::Tensor& chunk_bounds,
                         const at::Tensor& grad, at::TensorList grad_cores, int64_t num_rows);

}  // namespace dlrmbench
