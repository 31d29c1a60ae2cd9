// Pallas' paged attention kernel (paged_attention_kernel.py), ported line by line: the
// `inline_seq_dim` form (one grid step per sequence and KV head, a loop over its blocks of keys),
// with the megacore modes and int8 pages (quantization_utils).
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "paged_attention.h"
#include "usage_error.h"

namespace tessera::examples {

namespace {

// from_int8's divisor: int8 pages hold x * 127.5 / scale, rounded.
constexpr float kMaxInt8 = 127.5f;

// What the kernel is given besides its refs (the functools.partial arguments).
struct Static {
  int64_t batch_size;
  int64_t num_kv_heads;
  int64_t page_size;
  int64_t head_dim;
  int64_t pages_per_compute_block;
  int64_t pages_per_sequence;
  float mask_value;
  std::optional<float> soft_cap;
  int num_cores;
  bool batch_mode;
  bool kv_head_mode;
};

// One of K and V as the kernel sees it (MultiPageAsyncCopyDescriptor's refs): the pages in HBM,
// their double buffer in VMEM, the DMA semaphores, and for int8 pages the scales beside them.
template <class P>
struct PageSet {
  pltpu::AnyRef<const P> pages;
  pltpu::VmemRef<P> vmem;
  pltpu::DmaSemaphoreRef sems;
  std::optional<pltpu::AnyRef<const float>> scales{};
  std::optional<pltpu::VmemRef<float>> scales_vmem{};
};

// The async copies of block i's pages of sequence b, KV head h into buffer `buffer_index`: the
// pages, then their scales, all counted on the buffer's semaphore; started, or waited for.
template <class P>
void page_copies(const Static& st, pltpu::SmemRef<int32_t> page_indices_ref, const PageSet<P>& set,
                 int64_t b, int64_t h, int64_t i, int64_t buffer_index, bool start) {
  const int64_t page_offset = b * st.pages_per_sequence + i * st.pages_per_compute_block;
  auto each = [&](auto pages, auto vmem) {
    for (int64_t p = 0; p < st.pages_per_compute_block; ++p) {
      const int64_t page_index = page_indices_ref(page_offset + p);
      auto copy = pltpu::make_async_copy(pages.at(h).at(page_index), vmem.at(buffer_index).at(p),
                                         set.sems.at(buffer_index));
      start ? copy.start() : copy.wait();
    }
  };
  each(set.pages, set.vmem);
  if (set.scales) each(*set.scales, *set.scales_vmem);
}

// wait_and_get_loaded: the block as float32 (block tokens, head_dim); int8 pages dequantized
// (from_int8: x.astype(bfloat16) * scale / 127.5).
template <class P>
jnp::Value<float> wait_and_get_loaded(const Static& st, pltpu::SmemRef<int32_t> page_indices_ref,
                                      const PageSet<P>& set, int64_t b, int64_t h, int64_t i,
                                      int64_t buffer_index) {
  page_copies(st, page_indices_ref, set, b, h, i, buffer_index, false);
  const auto vmem = set.vmem.at(buffer_index);
  if (!set.scales) {
    return jnp::Value(vmem[pl::ellipsis].template astype<float>().reshape({-1, st.head_dim}));
  }
  const auto scales = set.scales_vmem->at(buffer_index);
  return jnp::Value((vmem[pl::ellipsis].template astype<float>().template astype<bfloat16>() *
                     scales[pl::ellipsis] / kMaxInt8)
                        .reshape({-1, st.head_dim}));
}

// paged_flash_attention_kernel_inline_seq_dim: the blocks of one sequence and KV head, each
// prefetching the next block's pages (of this sequence and head, or of the next ones).
template <class O, class P>
void paged_flash_attention(const Static& st, pltpu::SmemRef<int32_t> lengths_ref,
                           pltpu::SmemRef<int32_t> page_indices_ref,
                           pltpu::SmemRef<int32_t> buffer_index_ref,
                           pltpu::SmemRef<int32_t> init_flag_ref, pltpu::VmemRef<const O> q_ref,
                           const PageSet<P>& k_set, const PageSet<P>& v_set,
                           pltpu::VmemRef<O> o_ref, pltpu::VmemRef<float> m_ref,
                           pltpu::VmemRef<float> l_ref) {
  const int64_t num_groups = q_ref.shape()[0];
  const int64_t bk = st.page_size * st.pages_per_compute_block;
  const int64_t core_index = pl::program_id(0);
  const int64_t b_step = st.batch_mode ? st.num_cores : 1;
  const int64_t b_start = st.batch_mode ? core_index : 0;
  const int64_t h_step = st.kv_head_mode ? st.num_cores : 1;
  const int64_t h_start = st.kv_head_mode ? core_index : 0;
  const int64_t h = pl::program_id(2) * h_step + h_start;
  const int64_t b = pl::program_id(1) * b_step + b_start;
  const int64_t batch = st.batch_size;

  // The block after (b, h, i): the next block of this sequence and head, else the first of the
  // next head, else of the next sequence of nonzero length.
  struct BlockIndices {
    int64_t b, h, i;
  };
  auto compute_block_indices = [&](int64_t b0, int64_t h0, int64_t i0) {
    if (i0 * bk < lengths_ref(b0)) return BlockIndices{b0, h0, i0};
    const int64_t next_h = h0 + h_step;
    if (next_h < st.num_kv_heads) return BlockIndices{b0, next_h, 0};
    int64_t next_b = b0 + b_step;
    if (next_b < batch && lengths_ref(std::clamp<int64_t>(next_b, 0, batch - 1)) == 0) {
      // lax.fori_loop(next_next_b // b_step, batch // b_step, ...) over the zero lengths.
      int64_t nb = next_b + b_step;
      for (int64_t it = nb / b_step; it < batch / b_step; ++it) {
        if (lengths_ref(nb) == 0) nb += b_step;
      }
      next_b = nb;
    }
    return BlockIndices{next_b, h_start, 0};
  };
  auto start_kv = [&](int64_t b0, int64_t h0, int64_t i0, int64_t buffer_index) {
    page_copies(st, page_indices_ref, k_set, b0, h0, i0, buffer_index, true);
    page_copies(st, page_indices_ref, v_set, b0, h0, i0, buffer_index, true);
  };

  auto flash_attention = [&](int64_t i) {
    const int32_t init_flag = init_flag_ref(0);
    init_flag_ref(0) = 0;
    const int64_t buffer_index = buffer_index_ref(0);
    const BlockIndices next = compute_block_indices(b, h, i + 1);
    if (init_flag != 0) start_kv(b, h, i, buffer_index);  // prefetch_first_block
    if (i == 0) {
      m_ref = jnp::full_like(m_ref, -INFINITY);
      l_ref = jnp::zeros_like(l_ref);
      o_ref = jnp::zeros_like(o_ref);
    }
    if (next.b < batch) {  // prefetch_next_block
      const int64_t next_buffer_index = buffer_index == 0 ? 1 : 0;
      start_kv(next.b, next.h, next.i, next_buffer_index);
      buffer_index_ref(0) = static_cast<int32_t>(next_buffer_index);
    }
    jnp::Value q = q_ref[pl::ellipsis].template astype<float>();
    jnp::Value k = wait_and_get_loaded(st, page_indices_ref, k_set, b, h, i, buffer_index);
    jnp::Value qk = lax::dot_general<float>(q, k, {{{1}, {1}}, {{}, {}}});  // "gd,td->gt"
    if (st.soft_cap) qk = jnp::tanh(qk / *st.soft_cap) * *st.soft_cap;
    auto mask = i * bk + lax::broadcasted_iota<int32_t>(Shape{num_groups, bk}, 1) < lengths_ref(b);
    qk = qk + jnp::where(mask, 0.0f, st.mask_value);
    jnp::Value m_curr = qk.max(-1);
    jnp::Value s_curr = jnp::exp(qk - jnp::expand_dims(m_curr, 1));
    jnp::Value m_prev = m_ref[pl::ellipsis];
    jnp::Value l_prev = l_ref[pl::ellipsis];
    const Shape stats{num_groups, st.head_dim};
    jnp::Value l_curr = lax::broadcast_in_dim(s_curr.sum(-1), stats, {0});
    jnp::Value m_curr_b = lax::broadcast_in_dim(m_curr, stats, {0});
    jnp::Value m_next = jnp::maximum(m_prev, m_curr_b);
    jnp::Value alpha = jnp::exp(m_prev - m_next);
    jnp::Value beta = jnp::exp(m_curr_b - m_next);
    jnp::Value l_next = alpha * l_prev + beta * l_curr;
    m_ref = m_next;
    l_ref = l_next;
    jnp::Value v = wait_and_get_loaded(st, page_indices_ref, v_set, b, h, i, buffer_index);
    jnp::Value o_curr = jnp::einsum<float>("gt,td->gd", s_curr, v);
    o_ref = ((l_prev * alpha * o_ref[pl::ellipsis] + beta * o_curr) / l_next).template astype<O>();
  };

  // Initialise, then the blocks of the sequence.
  m_ref = jnp::full_like(m_ref, -INFINITY);
  l_ref = jnp::zeros_like(l_ref);
  o_ref = jnp::zeros_like(o_ref);
  const int64_t length = lengths_ref(b);
  for (int64_t i = 0; i < (length + bk - 1) / bk; ++i) {
    if (i * bk < length) flash_attention(i);
  }
}

// pages_hbm_ref.shape as the kernel reads it: (kv_heads, total_pages, page_size, head_dim).
template <class P>
const Shape& pages_shape(const Array<P>& pages) {
  return pages.shape();
}
const Shape& pages_shape(const QuantizedPages& pages) { return pages.weight.shape(); }

// The scales broadcast over head_dim (jnp.broadcast_to(scales, (..., head_dim))).
Array<float> broadcast_scales(const QuantizedPages& pages) {
  const Shape& s = pages.weight.shape();
  Array<float> out(s);
  const int64_t d = s[3], size = out.size();
  float* const to = out.data();
  const float* const scales = pages.scales.data();
  for (int64_t e = 0; e < size; ++e) to[e] = scales[e / d];
  return out;
}

// The call for q of dtype T, pages Pages (Array<T> or QuantizedPages) and an output (and running
// accumulator) of dtype O: O is T, or float32 where Pallas gives q a float32 layout (groups of
// fewer than 8 query heads).
template <class T, class O, class Pages>
Array<O> run_kernel(const Static& st, const Array<T>& q_in, const Pages& k_pages,
                    const Pages& v_pages, const Array<int32_t>& lengths,
                    const Array<int32_t>& page_indices, std::source_location where) {
  constexpr bool kQuantized = std::is_same_v<Pages, QuantizedPages>;
  using P = std::conditional_t<kQuantized, int8_t, T>;
  const int64_t batch_size = q_in.shape()[0];
  const int64_t num_q_heads = q_in.shape()[1];
  const int64_t num_groups = num_q_heads / st.num_kv_heads;
  const int num_cores = st.num_cores;
  using Smem = pltpu::SmemRef<int32_t>;
  auto plain_kernel = [st](Smem lengths_ref, Smem page_indices_ref, Smem buffer_index_ref,
                           Smem init_flag_ref, pltpu::VmemRef<const O> q_ref,
                           pltpu::AnyRef<const P> k_pages_hbm_ref,
                           pltpu::AnyRef<const P> v_pages_hbm_ref, pltpu::VmemRef<O> o_ref,
                           pltpu::VmemRef<float> m_ref, pltpu::VmemRef<float> l_ref,
                           pltpu::VmemRef<P> k_vmem_buffer, pltpu::VmemRef<P> v_vmem_buffer,
                           pltpu::DmaSemaphoreRef k_sems, pltpu::DmaSemaphoreRef v_sems) {
    paged_flash_attention<O, P>(st, lengths_ref, page_indices_ref, buffer_index_ref, init_flag_ref,
                                q_ref, {k_pages_hbm_ref, k_vmem_buffer, k_sems},
                                {v_pages_hbm_ref, v_vmem_buffer, v_sems}, o_ref, m_ref, l_ref);
  };
  auto quantized_kernel =
      [st](Smem lengths_ref, Smem page_indices_ref, Smem buffer_index_ref, Smem init_flag_ref,
           pltpu::VmemRef<const O> q_ref, pltpu::AnyRef<const P> k_pages_hbm_ref,
           pltpu::AnyRef<const float> k_scales_pages_hbm_ref,
           pltpu::AnyRef<const P> v_pages_hbm_ref,
           pltpu::AnyRef<const float> v_scales_pages_hbm_ref, pltpu::VmemRef<O> o_ref,
           pltpu::VmemRef<float> m_ref, pltpu::VmemRef<float> l_ref,
           pltpu::VmemRef<P> k_vmem_buffer, pltpu::VmemRef<float> k_scales_vmem_buffer,
           pltpu::VmemRef<P> v_vmem_buffer, pltpu::VmemRef<float> v_scales_vmem_buffer,
           pltpu::DmaSemaphoreRef k_sems, pltpu::DmaSemaphoreRef v_sems) {
        paged_flash_attention<O, P>(
            st, lengths_ref, page_indices_ref, buffer_index_ref, init_flag_ref, q_ref,
            {k_pages_hbm_ref, k_vmem_buffer, k_sems, k_scales_pages_hbm_ref, k_scales_vmem_buffer},
            {v_pages_hbm_ref, v_vmem_buffer, v_sems, v_scales_pages_hbm_ref, v_scales_vmem_buffer},
            o_ref, m_ref, l_ref);
      };

  // The q, output, m and l blocks: a sequence's query heads of one KV head.
  const bool batch_mode = st.batch_mode;
  const bool kv_head_mode = st.kv_head_mode;
  auto q_block_spec = pl::BlockSpec(
      {pl::squeezed, num_groups, st.head_dim},
      [num_cores, batch_mode, kv_head_mode](int core_index, int b, int h) {
        if (kv_head_mode) return pl::idx(b, h * num_cores + core_index, 0);
        if (batch_mode) return pl::idx(b * num_cores + core_index, h, 0);
        return pl::idx(b, h, 0);
      },
      where);
  const Shape page_block{2, st.pages_per_compute_block, st.page_size, st.head_dim};
  auto out_shape = pl::out_shape(ShapeDtypeStruct<O>{{batch_size, num_q_heads, st.head_dim}},
                                 ShapeDtypeStruct<float>{{batch_size, num_q_heads, 1}},
                                 ShapeDtypeStruct<float>{{batch_size, num_q_heads, 1}});
  auto grid = pl::grid({num_cores, batch_mode ? batch_size / num_cores : batch_size,
                        kv_head_mode ? st.num_kv_heads / num_cores : st.num_kv_heads});
  const pltpu::CompilerParams params{
      .dimension_semantics = {pltpu::PARALLEL, pltpu::ARBITRARY, pltpu::ARBITRARY}};
  // The megacore modes are written for a chip of two TensorCores, each running its half of the
  // first grid axis with its own SMEM scalars (one core running both halves in turn would wait
  // for copies its first half never started, as on a TPU): the mesh has as many cores as that axis.
  const pltpu::TensorCoreMesh mesh("core", num_cores);
  // page_indices.reshape(-1), and q in the output's dtype.
  Array<int32_t> flat_indices(Shape{page_indices.size()});
  std::copy(page_indices.data(), page_indices.data() + page_indices.size(), flat_indices.data());
  Array<O> q_o(q_in.shape());
  for (int64_t e = 0; e < q_in.size(); ++e) q_o.data()[e] = static_cast<O>(q_in.data()[e]);
  const Array<int32_t> buffer_index({1}, {0});
  const Array<int32_t> init_flag({1}, {1});
  if constexpr (kQuantized) {
    auto call = pl::pallas_call(
        quantized_kernel, out_shape,
        pltpu::PrefetchScalarGridSpec<4>(
            grid,
            pl::in_specs(q_block_spec, pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                         pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
            pl::out_specs(q_block_spec, q_block_spec, q_block_spec),
            pl::scratch_shapes(pltpu::VMEM<P>(page_block), pltpu::VMEM<float>(page_block),
                               pltpu::VMEM<P>(page_block), pltpu::VMEM<float>(page_block),
                               pltpu::SemaphoreType::DMA({2}), pltpu::SemaphoreType::DMA({2}))),
        params, mesh, pl::name("paged_flash_attention_kernel"));
    auto [out, m, l] = call(lengths, flat_indices, buffer_index, init_flag, q_o, k_pages.weight,
                            broadcast_scales(k_pages), v_pages.weight, broadcast_scales(v_pages));
    return out;
  } else {
    auto call = pl::pallas_call(
        plain_kernel, out_shape,
        pltpu::PrefetchScalarGridSpec<4>(
            grid, pl::in_specs(q_block_spec, pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
            pl::out_specs(q_block_spec, q_block_spec, q_block_spec),
            pl::scratch_shapes(pltpu::VMEM<P>(page_block), pltpu::VMEM<P>(page_block),
                               pltpu::SemaphoreType::DMA({2}), pltpu::SemaphoreType::DMA({2}))),
        params, mesh, pl::name("paged_flash_attention_kernel"));
    auto [out, m, l] = call(lengths, flat_indices, buffer_index, init_flag, q_o, k_pages, v_pages);
    return out;
  }
}

template <class T, class Pages>
Array<T> paged_attention_impl(const Array<T>& q, const Pages& k_pages, const Pages& v_pages,
                              const Array<int32_t>& lengths, const Array<int32_t>& page_indices,
                              const PagedAttentionOptions& options, std::source_location where) {
  constexpr const char* kName = "paged_attention";
  auto refuse = [&](const std::string& what, const std::string& hint) {
    usage_error(kName, what, hint, where);
  };
  const Shape& kv_shape = pages_shape(k_pages);
  if (q.rank() != 3 || kv_shape.rank() != 4 || page_indices.rank() != 2) {
    refuse(
        "q must be (batch, q_heads, head_dim), the pages (kv_heads, total_pages, page_size, "
        "head_dim) and page_indices (batch, pages_per_sequence); got q " +
            q.shape().to_string() + ", k_pages " + kv_shape.to_string() + ", page_indices " +
            page_indices.shape().to_string(),
        "give arrays of those ranks");
  }
  const int64_t batch_size = q.shape()[0];
  const int64_t num_q_heads = q.shape()[1];
  const int64_t head_dim = q.shape()[2];
  const int64_t num_kv_heads = kv_shape[0];
  const int64_t page_size = kv_shape[2];
  const int64_t pages_per_sequence = page_indices.shape()[1];
  const int64_t ppcb = options.pages_per_compute_block;
  if (kv_shape != pages_shape(v_pages)) {
    refuse("k_pages and v_pages must have the same shape; got " + kv_shape.to_string() + " and " +
               pages_shape(v_pages).to_string(),
           "page keys and values alike");
  }
  if constexpr (std::is_same_v<Pages, QuantizedPages>) {
    Shape scales = kv_shape;
    scales[3] = 1;
    for (const QuantizedPages* pages : {&k_pages, &v_pages}) {
      if (pages->scales.shape() != scales) {
        refuse("the scales of int8 pages " + kv_shape.to_string() + " must be " +
                   scales.to_string() + "; got " + pages->scales.shape().to_string(),
               "make them with quantize_to_int8");
      }
    }
  }
  if (num_kv_heads < 1 || num_q_heads % num_kv_heads != 0) {
    refuse("the number of q heads (" + std::to_string(num_q_heads) +
               ") must be divisible by the number of KV heads (" + std::to_string(num_kv_heads) +
               ")",
           "group the query heads evenly over the KV heads");
  }
  if (kv_shape[3] != head_dim) {
    refuse("head_dim of q (" + std::to_string(head_dim) + ") must be that of K/V (" +
               std::to_string(kv_shape[3]) + ")",
           "use one head_dim");
  }
  if (ppcb < 1 || pages_per_sequence % ppcb != 0) {
    refuse("pages_per_compute_block (" + std::to_string(ppcb) +
               ") must divide the pages per sequence (" + std::to_string(pages_per_sequence) + ")",
           "pick a divisor of page_indices.shape[1]");
  }
  if (lengths.shape() != Shape{batch_size}) {
    refuse("lengths must be (batch,) = (" + std::to_string(batch_size) + ",); got " +
               lengths.shape().to_string(),
           "give one length per sequence");
  }
  if (page_indices.shape()[0] != batch_size) {
    refuse("page_indices must have q's batch size (" + std::to_string(batch_size) + "); got " +
               page_indices.shape().to_string(),
           "give one row of page indices per sequence");
  }
  const std::string& mode = options.megacore_mode;
  if (mode != "" && mode != "batch" && mode != "kv_head") {
    refuse("megacore_mode must be \"\", \"batch\" or \"kv_head\"; got \"" + mode + "\"",
           "leave it empty for one core");
  }
  if ((mode == "batch" && batch_size % 2 != 0) || (mode == "kv_head" && num_kv_heads % 2 != 0)) {
    refuse("megacore_mode \"" + mode + "\" needs an even " +
               (mode == "batch" ? "batch size" : "number of KV heads"),
           "use the other mode, or none");
  }
  const Static st{batch_size,
                  num_kv_heads,
                  page_size,
                  head_dim,
                  ppcb,
                  pages_per_sequence,
                  options.mask_value,
                  options.attn_logits_soft_cap,
                  mode.empty() ? 1 : 2,
                  mode == "batch",
                  mode == "kv_head"};
  // Pallas gives q (and the output) a float32 layout when a group is not a multiple of 8 heads.
  if ((num_q_heads / num_kv_heads) % 8 != 0) {
    const Array<float> out =
        run_kernel<T, float>(st, q, k_pages, v_pages, lengths, page_indices, where);
    Array<T> cast(out.shape());
    for (int64_t e = 0; e < out.size(); ++e) cast.data()[e] = static_cast<T>(out.data()[e]);
    return cast;
  }
  return run_kernel<T, T>(st, q, k_pages, v_pages, lengths, page_indices, where);
}

}  // namespace

template <class T>
Array<T> paged_attention(const Array<T>& q, const Array<T>& k_pages, const Array<T>& v_pages,
                         const Array<int32_t>& lengths, const Array<int32_t>& page_indices,
                         const PagedAttentionOptions& options, std::source_location where) {
  return paged_attention_impl(q, k_pages, v_pages, lengths, page_indices, options, where);
}

template <class T>
Array<T> paged_attention(const Array<T>& q, const QuantizedPages& k_pages,
                         const QuantizedPages& v_pages, const Array<int32_t>& lengths,
                         const Array<int32_t>& page_indices, const PagedAttentionOptions& options,
                         std::source_location where) {
  return paged_attention_impl(q, k_pages, v_pages, lengths, page_indices, options, where);
}

template <class T>
QuantizedPages quantize_to_int8(const Array<T>& x) {
  const Shape& s = x.shape();
  const int64_t d = s.rank() > 0 ? s[s.rank() - 1] : 1;
  Shape scales_shape = s;
  if (s.rank() > 0) scales_shape[s.rank() - 1] = 1;
  QuantizedPages q{Array<int8_t>(s), Array<float>(scales_shape)};
  const T* const in = x.data();
  int8_t* const weight = q.weight.data();
  float* const scales = q.scales.data();
  const int64_t size = x.size();
  for (int64_t r = 0; r * d < size; ++r) {
    const T* const row = in + r * d;
    float h = 0.0f;  // get_quantization_scales: the row's largest magnitude
    for (int64_t e = 0; e < d; ++e) h = std::max(h, std::abs(static_cast<float>(row[e])));
    scales[r] = h;
    for (int64_t e = 0; e < d; ++e) {
      // to_int8: rint(x * (127.5 / h)), which reaches 128 at x = h: saturated to int8's range.
      const float v = h == 0.0f ? 0.0f : std::rint(static_cast<float>(row[e]) * (kMaxInt8 / h));
      weight[r * d + e] = static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
    }
  }
  return q;
}

template Array<float> paged_attention(const Array<float>&, const Array<float>&, const Array<float>&,
                                      const Array<int32_t>&, const Array<int32_t>&,
                                      const PagedAttentionOptions&, std::source_location);
template Array<bfloat16> paged_attention(const Array<bfloat16>&, const Array<bfloat16>&,
                                         const Array<bfloat16>&, const Array<int32_t>&,
                                         const Array<int32_t>&, const PagedAttentionOptions&,
                                         std::source_location);

template Array<float> paged_attention(const Array<float>&, const QuantizedPages&,
                                      const QuantizedPages&, const Array<int32_t>&,
                                      const Array<int32_t>&, const PagedAttentionOptions&,
                                      std::source_location);
template Array<bfloat16> paged_attention(const Array<bfloat16>&, const QuantizedPages&,
                                         const QuantizedPages&, const Array<int32_t>&,
                                         const Array<int32_t>&, const PagedAttentionOptions&,
                                         std::source_location);
template QuantizedPages quantize_to_int8(const Array<float>&);
template QuantizedPages quantize_to_int8(const Array<bfloat16>&);

}  // namespace tessera::examples
