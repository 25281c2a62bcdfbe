// Family-independent slot operations over a pool's tensors (leading dim = slot).
#pragma once
#include <vector>

#include "replayssm/types.h"

namespace replayssm::slot_ops {

// For every tensor of `pool` (absent ones skipped): row dst[i] = row src[i].
// Pad entries (src or dst == pad) are skipped. Rows may have any strides.
void copy_cpu(const std::vector<Tensor>& pool, const Tensor& src, const Tensor& dst, int64_t pad);
// Zero row slot[i] of every tensor of `pool`.
void zero_cpu(const std::vector<Tensor>& pool, const Tensor& slot, int64_t pad);

// Device versions (stream-ordered, no host synchronisation). Out-of-range
// slots set STATUS_BAD_SLOT in exec.device_status and are skipped.
void copy_cuda(const std::vector<Tensor>& pool, const Tensor& src, const Tensor& dst, int64_t pad,
               const Exec& exec);
void zero_cuda(const std::vector<Tensor>& pool, const Tensor& slot, int64_t pad, const Exec& exec);

}  // namespace replayssm::slot_ops
