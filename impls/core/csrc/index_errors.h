// Unchecked indices on a GPU (an op called with check_indices=False): a kernel never reads outside its operands.
// An index outside its range reads zeros and adds nothing, and the first thread that meets one writes
// (what, position, value, limit) into its device's index-error record, an int64 [4] tensor on that device (what = 0:
// none). dlrmbench::raise_index_error reads and clears it: one host read, once per step (the TT collections do it
// at the end of forward when the batch was not checked up front), then a ValueError naming the op, the index and
// its value. The CPU kernels check always (no sync to save) and raise at once, so the CPU record stays empty.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace dlrmbench {

// what = op * 8 + index kind; index_errors.cpp names them.
enum IndexOp : int64_t { kOpPrefix = 1, kOpLast = 2, kOpLastBackward = 3, kOpPrefixBackward = 4, kOpStages = 5 };
enum IndexKind : int64_t { kPrefixId = 1, kItemGroup = 2, kItemLast = 3, kItemRow = 4 };

// The record of `device` (allocated zeroed on first use; lives as long as the process).
at::Tensor index_error_record(const c10::Device& device);

#ifdef WITH_CUDA
// Notes (never raises, no sync) the first item whose row prefix_ids[item_group[i]] * p_last + item_last[i] is not
// in [0, num_rows): the fused op's check against the table's rows when its caller skips checks (tt.cu).
void note_bad_rows_cuda(const at::Tensor& prefix_ids, const at::Tensor& item_group, const at::Tensor& item_last,
                        int64_t p_last, int64_t num_rows);
#endif

}  // namespace dlrmbench
