// tt_stages / tt_stages_backward composed of the per-stage ops (see tt_stages_composed.h).
#include "tt_stages_composed.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

#include "composed.h"
#include "index_errors.h"
#include "op_args.h"

namespace dlrmbench {
namespace {

// The typed signatures are the kernels' own (an out tensor by value).
void call_prefix(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& ids,
                 const at::Tensor& out, bool check_indices) {
  static const auto h = dispatcher_op("dlrmbench::tt_prefix")
                            .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                                        at::Tensor, bool)>();
  h.call(cores, q, r, ids, out, check_indices);
}

// The rows the items read against the table's rows (num_rows >= 0), after the stage ops checked the digits: on the
// CPU always, on a GPU when the caller asks for checks (one host read); else a GPU kernel notes a bad row in the
// device's index-error record (index_errors.h), read once per step.
void check_item_rows(const char* name, const TTShape& s, const at::Tensor& prefix_ids, const at::Tensor& item_group,
                     const at::Tensor& item_last, int64_t num_rows, bool check_indices) {
  if (num_rows < 0 || item_group.numel() == 0) return;
  if (!check_indices && !item_group.device().is_cpu()) {
#ifdef WITH_CUDA
    note_bad_rows_cuda(prefix_ids, item_group, item_last, s.p[s.d - 1], num_rows);
#endif
    return;
  }
  const at::Tensor rows = prefix_ids.index_select(0, item_group).mul(s.p[s.d - 1]).add(item_last);
  const at::Tensor bad = rows.ge(num_rows).nonzero();
  if (bad.numel() == 0) return;
  const int64_t i = bad[0][0].item<int64_t>();
  TORCH_CHECK_VALUE(false, name, ": item ", i, " reads row ", rows[i].item<int64_t>(), " of a table of ", num_rows,
                    " rows: the id is out of range (rows past ", num_rows, " are the TT shape's padding)");
}

}  // namespace

void tt_stages_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                        const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out,
                        bool check_indices, int64_t num_rows) {
  const TTShape s =
      check_tt_stages_args("tt_stages", cores, q, r, prefix_ids, item_group, item_last, out, "out", num_rows);
  const at::Tensor prefix = cores[0].new_empty({prefix_ids.numel(), s.prefix_width()});
  call_prefix(cores, q, r, prefix_ids, prefix, check_indices);
  static const auto last = dispatcher_op("dlrmbench::tt_last")
                               .typed<void(const at::Tensor&, at::TensorList, c10::IntArrayRef, c10::IntArrayRef,
                                           const at::Tensor&, const at::Tensor&, at::Tensor, bool)>();
  last.call(prefix, cores, q, r, item_group, item_last, out, check_indices);
  check_item_rows("tt_stages", s, prefix_ids, item_group, item_last, num_rows, check_indices);
}

void tt_stages_backward_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                 const at::Tensor& prefix_ids, const at::Tensor& item_group,
                                 const at::Tensor& item_last, const at::Tensor& grad_items,
                                 at::TensorList grad_cores, bool check_indices, int64_t num_rows) {
  const char* name = "tt_stages_backward";
  const TTShape s = check_tt_stages_args(name, cores, q, r, prefix_ids, item_group, item_last, grad_items,
                                         "grad_items", num_rows);
  check_all_core_grads(name, s, cores, grad_cores);
  const int64_t G = prefix_ids.numel();
  const at::Tensor prefix = cores[0].new_empty({G, s.prefix_width()});
  call_prefix(cores, q, r, prefix_ids, prefix, check_indices);
  check_item_rows(name, s, prefix_ids, item_group, item_last, num_rows, check_indices);
  const at::Tensor d_prefix = cores[0].new_empty({G, s.prefix_width()});
  static const auto last_bwd =
      dispatcher_op("dlrmbench::tt_last_backward")
          .typed<void(const at::Tensor&, at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                      const at::Tensor&, const at::Tensor&, at::Tensor, at::Tensor, bool)>();
  last_bwd.call(prefix, cores, q, r, item_group, item_last, grad_items, grad_cores[s.d - 1], d_prefix,
                check_indices);
  static const auto prefix_bwd = dispatcher_op("dlrmbench::tt_prefix_backward")
                                     .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                                                 const at::Tensor&, at::TensorList, bool)>();
  prefix_bwd.call(cores, q, r, prefix_ids, d_prefix, grad_cores.slice(0, s.d - 1), check_indices);
}

// On a GPU the stages stay separate kernels (as EcoRec's and EL-Rec's CUDA code run them): the prefix buffer
// lives in device memory either way, and the stage kernels are where the GPU's work is.
DLRMBENCH_COMPOSED("tt_stages", tt_stages_composed)
DLRMBENCH_COMPOSED("tt_stages_backward", tt_stages_backward_composed)

}  // namespace dlrmbench
