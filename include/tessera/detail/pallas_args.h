// Internal: what a pl::pallas_call does with each argument and output, at compile time. A call
// argument is an Array (or a VmemArray, which stands for VMEM), a std::tuple of Arrays (a
// grouped scalar-prefetch operand, as gmm's metadata tuple), a std::optional<Array> or
// std::nullopt (an optional operand, Pallas' None), or a SemaphoreArray; an output is an array, a
// VMEM or SMEM array or semaphores (tessera/resident.h). For each, these traits give the ref type
// the body receives and build it at a step from the runtime's PallasStep.
#pragma once

#include <cstddef>
#include <optional>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/kernel.h"
#include "tessera/pipeline.h"
#include "tessera/ref.h"
#include "tessera/resident.h"
#include "tessera/semaphore.h"

namespace tessera::detail {

/// What the body gets at one grid step: the SMEM copies of the scalar-prefetch arrays (every
/// leaf of a grouped operand in order); per operand (present array inputs, then array outputs)
/// its window and the window's shape, or for an operand the body takes in HBM its whole array;
/// the user's scratch buffers; the semaphore operands' first cells (on this core).
struct PallasStep {
  const RawRef* prefetch;
  const WindowRef* windows;
  const Shape* window_shapes;
  const RawRef* arrays;
  void* const* scratch;
  SemaphoreCell* const* semaphores;
};

/// Where argument or output k's data is in a PallasStep: its first scalar-prefetch leaf, its
/// operand, its semaphore operand (-1 where it has none: an absent optional operand).
struct PallasSlot {
  int leaf = -1;
  int operand = -1;
  int semaphore = -1;
};

/// The ref a body parameter declared in `Space` receives for an operand of T (inputs read-only).
template <MemorySpace Space, class T, bool IsOutput>
using passed_ref =
    std::conditional_t<Space == MemorySpace::ANY,
                       pltpu::HbmRef<std::conditional_t<IsOutput, T, const T>>, pl::Ref<T, Space>>;

/// The ref of operand `k` at a step, for a parameter declared in `Space`: the HBM ref itself
/// (ANY: not pipelined), or its window in VMEM or SMEM.
template <MemorySpace Space, class T, bool IsOutput>
passed_ref<Space, T, IsOutput> operand_ref(const PallasStep& s, int k) {
  if constexpr (Space == MemorySpace::ANY) {
    using E = std::conditional_t<IsOutput, T, const T>;
    const RawRef& a = s.arrays[k];
    return pltpu::HbmRef<E>(static_cast<E*>(a.data), a.shape, a.strides);
  } else {
    return pl::Ref<T, Space>(static_cast<T*>(s.windows[k].data), s.window_shapes[k],
                             *s.windows[k].strides);
  }
}

template <class T>
pltpu::SmemRef<T> prefetch_ref(const PallasStep& s, int leaf) {
  return pltpu::SmemRef<T>(static_cast<T*>(s.prefetch[leaf].data), s.prefetch[leaf].shape);
}

template <class E>
using array_element_t = typename std::decay_t<E>::value_type;

/// A call argument: `prefetch` (may be a scalar-prefetch operand), `input` (may be an input),
/// its array leaves, and per position the parameter type and how to make it.
template <class A>
struct PallasArg {
  static constexpr bool prefetch = false;
  static constexpr bool input = false;
};
template <class T>
struct PallasArg<Array<T>> {
  static constexpr bool prefetch = true;
  static constexpr bool input = true;
  static constexpr int leaves = 1;
  static constexpr MemorySpace source = MemorySpace::HBM;
  using prefetch_param = pltpu::SmemRef<T>;
  static prefetch_param make_prefetch(const PallasStep& s, int leaf) {
    return prefetch_ref<T>(s, leaf);
  }
  template <class Body, size_t K>
  using param = passed_ref<declared_space<Body, K>(), T, false>;
  template <class Body, size_t K>
  static param<Body, K> make(const PallasStep& s, const PallasSlot& slot) {
    return operand_ref<declared_space<Body, K>(), T, false>(s, slot.operand);
  }
  static const Array<T>* array(const Array<T>& a) noexcept { return &a; }
};
template <class T>
struct PallasArg<pltpu::VmemArray<T>> : PallasArg<Array<T>> {
  static constexpr MemorySpace source = MemorySpace::VMEM;
};
template <class T>
struct PallasArg<pltpu::SmemArray<T>> : PallasArg<Array<T>> {
  static constexpr bool prefetch = false;
  static constexpr MemorySpace source = MemorySpace::SMEM;
};

/// Every core's copy of an SMEM array (core c's at [c]); empty for any other array, which the
/// cores share. Raises kShapeMismatch at `where` for a copy whose shape is not core 0's (one
/// assigned another Array).
template <class A>
std::vector<const void*> core_copies(const A& a, std::source_location where) {
  std::vector<const void*> copies;
  if constexpr (requires { a.num_cores(); }) {
    for (int c = 0; c < a.num_cores(); ++c) {
      if (a.core(c).shape() != a.shape()) {
        smem_copy_shape_mismatch(a.shape(), a.core(c).shape(), c, where);
      }
      copies.push_back(a.core(c).data());
    }
  }
  return copies;
}
/// One leaf of a grouped scalar-prefetch operand: an Array (one SMEM copy, passed as an
/// SmemRef) or std::nullopt (Pallas' None leaf: no copy, passed as std::nullopt).
template <class E>
struct PrefetchLeaf {
  static constexpr bool valid = false;
};
template <class T>
struct PrefetchLeaf<Array<T>> {
  static constexpr bool valid = true;
  static constexpr int count = 1;
  using param = pltpu::SmemRef<T>;
  static param make(const PallasStep& s, int leaf) { return prefetch_ref<T>(s, leaf); }
};
template <>
struct PrefetchLeaf<std::nullopt_t> {
  static constexpr bool valid = true;
  static constexpr int count = 0;
  using param = std::nullopt_t;
  static param make(const PallasStep&, int) { return std::nullopt; }
};

template <class... E>
requires(sizeof...(E) > 0) struct PallasArg<std::tuple<E...>> {
  static_assert((PrefetchLeaf<std::decay_t<E>>::valid && ...),
                "tessera: a grouped scalar-prefetch operand is a std::tuple of Arrays (and "
                "std::nullopt for Pallas' None leaves)");
  static constexpr bool prefetch = true;
  static constexpr bool input = false;
  static constexpr int leaves = (0 + ... + PrefetchLeaf<std::decay_t<E>>::count);
  using prefetch_param = std::tuple<typename PrefetchLeaf<std::decay_t<E>>::param...>;
  static prefetch_param make_prefetch(const PallasStep& s, int leaf) {
    return make_at(s, leaf, std::index_sequence_for<E...>{});
  }
  // The SMEM copy of element I is the first leaf plus the Arrays before I.
  template <size_t I>
  static constexpr int leaf_offset() {
    constexpr int counts[] = {PrefetchLeaf<std::decay_t<E>>::count...};
    int n = 0;
    for (size_t k = 0; k < I; ++k) n += counts[k];
    return n;
  }
  template <size_t... I>
  static prefetch_param make_at(const PallasStep& s, int leaf, std::index_sequence<I...>) {
    return prefetch_param{
        PrefetchLeaf<std::decay_t<std::tuple_element_t<I, std::tuple<E...>>>>::make(
            s, leaf + leaf_offset<I>())...};
  }
};
template <class T>
struct PallasArg<std::optional<Array<T>>> {
  static constexpr bool prefetch = false;
  static constexpr bool input = true;
  static constexpr MemorySpace source = MemorySpace::HBM;
  template <class Body, size_t K>
  using param = std::optional<passed_ref<declared_space<Body, K>(), T, false>>;
  template <class Body, size_t K>
  static param<Body, K> make(const PallasStep& s, const PallasSlot& slot) {
    if (slot.operand < 0) return std::nullopt;
    return operand_ref<declared_space<Body, K>(), T, false>(s, slot.operand);
  }
  static const Array<T>* array(const std::optional<Array<T>>& a) noexcept {
    return a ? &*a : nullptr;
  }
};
template <>
struct PallasArg<std::nullopt_t> {
  static constexpr bool prefetch = false;
  static constexpr bool input = true;
  // A body parameter declared std::optional<R> gets an empty one; any other gets std::nullopt.
  template <class Body, size_t K>
  using param = std::conditional_t<
      !std::is_same_v<typename UnwrapOptional<typename BodyParam<Body, K>::type>::type,
                      typename BodyParam<Body, K>::type>,
      typename BodyParam<Body, K>::type, std::nullopt_t>;
  template <class Body, size_t K>
  static param<Body, K> make(const PallasStep&, const PallasSlot&) {
    if constexpr (std::is_same_v<param<Body, K>, std::nullopt_t>) {
      return std::nullopt;
    } else {
      return param<Body, K>{};
    }
  }
};
template <SemaphoreKind Kind>
struct PallasArg<pltpu::SemaphoreArray<Kind>> {
  static constexpr bool prefetch = false;
  static constexpr bool input = true;
  template <class Body, size_t K>
  using param = pltpu::BasicSemaphoreRef<Kind>;
};

/// An output: the parameter type, how to make it, what the call returns for it.
template <class O>
struct PallasOut {
  template <class Body, size_t K>
  using param = passed_ref<declared_space<Body, K>(), O, true>;
  template <class Body, size_t K>
  static param<Body, K> make(const PallasStep& s, const PallasSlot& slot) {
    return operand_ref<declared_space<Body, K>(), O, true>(s, slot.operand);
  }
  static constexpr MemorySpace source = MemorySpace::HBM;
};
template <class T>
struct PallasOut<VmemOut<T>> {
  template <class Body, size_t K>
  using param = pltpu::VmemRef<T>;
  template <class Body, size_t K>
  static param<Body, K> make(const PallasStep& s, const PallasSlot& slot) {
    return operand_ref<MemorySpace::VMEM, T, true>(s, slot.operand);
  }
  static constexpr MemorySpace source = MemorySpace::VMEM;
};
template <class T>
struct PallasOut<SmemOut<T>> {
  template <class Body, size_t K>
  using param = pltpu::SmemRef<T>;
  template <class Body, size_t K>
  static param<Body, K> make(const PallasStep& s, const PallasSlot& slot) {
    return operand_ref<MemorySpace::SMEM, T, true>(s, slot.operand);
  }
  static constexpr MemorySpace source = MemorySpace::SMEM;
};
template <SemaphoreKind Kind>
struct PallasOut<SemaphoreOut<Kind>> {
  template <class Body, size_t K>
  using param = pltpu::BasicSemaphoreRef<Kind>;
};

template <class O>
inline constexpr bool is_semaphore_out_v = false;
template <SemaphoreKind K>
inline constexpr bool is_semaphore_out_v<SemaphoreOut<K>> = true;
template <class A>
inline constexpr bool is_semaphore_arg_v = false;
template <SemaphoreKind K>
inline constexpr bool is_semaphore_arg_v<pltpu::SemaphoreArray<K>> = true;

}  // namespace tessera::detail
