// tt_stages / tt_stages_backward composed of the per-stage ops (see tt_stages_composed.h).
#include "tt_stages_composed.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <vector>

#include "op_args.h"

namespace dlrmbench {
namespace {

c10::OperatorHandle op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

// The typed signatures are the kernels' own (an out tensor by value).
void call_prefix(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& ids,
                 const at::Tensor& out, bool check_indices) {
  static const auto h = op("dlrmbench::tt_prefix")
                            .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                                        at::Tensor, bool)>();
  h.call(cores, q, r, ids, out, check_indices);
}

}  // namespace

void tt_stages_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                        const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out,
                        bool check_indices) {
  const TTShape s = check_tt_stages_args("tt_stages", cores, q, r, prefix_ids, item_group, item_last, out, "out");
  const at::Tensor prefix = cores[0].new_empty({prefix_ids.numel(), s.prefix_width()});
  call_prefix(cores, q, r, prefix_ids, prefix, check_indices);
  static const auto last = op("dlrmbench::tt_last")
                               .typed<void(const at::Tensor&, at::TensorList, c10::IntArrayRef, c10::IntArrayRef,
                                           const at::Tensor&, const at::Tensor&, at::Tensor, bool)>();
  last.call(prefix, cores, q, r, item_group, item_last, out, check_indices);
}

void tt_stages_backward_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                 const at::Tensor& prefix_ids, const at::Tensor& item_group,
                                 const at::Tensor& item_last, const at::Tensor& grad_items,
                                 at::TensorList grad_cores, bool check_indices) {
  const char* name = "tt_stages_backward";
  const TTShape s = check_tt_stages_args(name, cores, q, r, prefix_ids, item_group, item_last, grad_items,
                                         "grad_items");
  check_all_core_grads(name, s, cores, grad_cores);
  const int64_t G = prefix_ids.numel();
  const at::Tensor prefix = cores[0].new_empty({G, s.prefix_width()});
  call_prefix(cores, q, r, prefix_ids, prefix, check_indices);
  const at::Tensor d_prefix = cores[0].new_empty({G, s.prefix_width()});
  static const auto last_bwd =
      op("dlrmbench::tt_last_backward")
          .typed<void(const at::Tensor&, at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                      const at::Tensor&, const at::Tensor&, at::Tensor, at::Tensor, bool)>();
  last_bwd.call(prefix, cores, q, r, item_group, item_last, grad_items, grad_cores[s.d - 1], d_prefix,
                check_indices);
  static const auto prefix_bwd = op("dlrmbench::tt_prefix_backward")
                                     .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                                                 const at::Tensor&, at::TensorList, bool)>();
  prefix_bwd.call(cores, q, r, prefix_ids, d_prefix, grad_cores.slice(0, s.d - 1), check_indices);
}

#ifdef WITH_CUDA
// On a GPU the stages stay separate kernels (as EcoRec's and EL-Rec's CUDA code run them): the prefix buffer
// lives in device memory either way, and the stage kernels are where the GPU's work is.
TORCH_LIBRARY_IMPL(dlrmbench, CUDA, m) {
  m.impl("tt_stages", &tt_stages_composed);
  m.impl("tt_stages_backward", &tt_stages_backward_composed);
}
#endif

}  // namespace dlrmbench
