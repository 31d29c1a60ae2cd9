// Pallas' paged attention kernel (jax/experimental/pallas/ops/tpu/paged_attention), ported line by
// line: grouped-query attention of one query token per sequence against a KV cache kept in
// pages, with each sequence's pages named by a page table. The lengths and the page table are
// scalar-prefetched into SMEM; the kernel copies the pages of each block of keys and values into
// VMEM by hand with async copies, double-buffered across grid steps (the next block's copies start
// before this block is computed, even when the next block belongs to the next head or sequence),
// and runs an online softmax over the blocks.
#pragma once

#include <tessera/tessera.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <source_location>
#include <string>

namespace tessera::examples {

/// The keyword arguments of Pallas' `paged_attention`.
struct PagedAttentionOptions {
  /// Pages per block of keys (required): a block is pages_per_compute_block * page_size tokens, and
  /// it must divide the pages per sequence.
  int64_t pages_per_compute_block = 0;
  /// "" (one core), "batch" (the cores split the sequences) or "kv_head" (the KV heads); the two
  /// megacore modes take 2 cores and need an even batch or KV head count.
  std::string megacore_mode{};
  /// Added to the logits of the tokens past a sequence's length.
  float mask_value = -0.7f * std::numeric_limits<float>::max();
  /// When given, logits become tanh(logits / cap) * cap.
  std::optional<float> attn_logits_soft_cap{};
};

/// Pages quantized to int8 (quantization_utils.QuantizedTensor): `weight` holds
/// rint(x * 127.5 / scale), `scales` (..., 1) each row's largest magnitude.
struct QuantizedPages {
  Array<int8_t> weight;
  Array<float> scales;
};

/// `quantize_to_int8(x)`: each row along the last axis scaled by its largest magnitude. Where
/// Pallas' rint(x * 127.5 / scale) gives 128 (at x = scale), the int8 saturates at 127.
template <class T>
QuantizedPages quantize_to_int8(const Array<T>& x);

/// `paged_attention(q, k_pages, v_pages, lengths, page_indices, ...)`: q is (batch, q_heads,
/// head_dim), k_pages and v_pages (kv_heads, total_pages, page_size, head_dim), lengths int32
/// (batch), page_indices int32 (batch, pages_per_sequence) with entries in [0, total_pages).
/// Returns (batch, q_heads, head_dim) in q's dtype; rows of sequences of length 0 are unspecified,
/// as in Pallas. T is float or bfloat16. Throws UsageError for the arguments Pallas refuses (its
/// messages' conditions), and KernelError for a page index or length that reads past the pages
/// or the page table.
template <class T>
Array<T> paged_attention(const Array<T>& q, const Array<T>& k_pages, const Array<T>& v_pages,
                         const Array<int32_t>& lengths, const Array<int32_t>& page_indices,
                         const PagedAttentionOptions& options,
                         std::source_location where = std::source_location::current());

/// The same with int8 pages: the kernel copies each page's scales beside it and dequantizes the
/// block (from_int8: x.astype(bfloat16) * scale / 127.5) before the products.
template <class T>
Array<T> paged_attention(const Array<T>& q, const QuantizedPages& k_pages,
                         const QuantizedPages& v_pages, const Array<int32_t>& lengths,
                         const Array<int32_t>& page_indices, const PagedAttentionOptions& options,
                         std::source_location where = std::source_location::current());

}  // namespace tessera::examples
