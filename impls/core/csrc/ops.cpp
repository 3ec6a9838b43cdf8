// The dlrmbench op library: schemas only. Kernels register per backend in cpu/*.cpp and cuda/*.cu.
#include <torch/library.h>

TORCH_LIBRARY(dlrmbench, m) {
  // Validates table-major jagged lookups. values int64 [nnz]; offsets int64 [T*B+1]; table_rows int64 [T].
  // Returns int64 [5] = (code, table, bag, position, value) of the first problem in (offset, bag) order;
  // code 0 means valid. Codes: 1 offsets[0] != 0, 2 offsets decrease, 3 offsets[-1] != nnz,
  // 4 negative id, 5 id >= rows. For codes 1-3 `position` is the offset index, `value` the offset.
  m.def("bounds_check(Tensor values, Tensor offsets, Tensor table_rows, int batch_size) -> Tensor");
  // Per-table sorted unique ids. Returns (unique [U], unique_offsets [T+1], inverse [nnz], counts [U],
  // sorted_positions [nnz]): table t's unique ids are unique[unique_offsets[t]:unique_offsets[t+1]],
  // ascending; values[i] == unique[inverse[i]]; sorted_positions lists the original positions in
  // (table, id, position) order, i.e. the back map from sorted order to the input.
  m.def(
      "jagged_unique(Tensor values, Tensor offsets, int num_tables, int batch_size) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}
