// File: tessera/detail/ref_item.h
//
// What `x_ref[...]` gives: detail::RefItem, a leaf that reads the indexed view where it is used
// and that `o_ref[...] = e` / `o_ref[...] += e` write through, and Ref::operator[]. Included by
// vector_ops.h, whose nodes and assignments it uses.
#pragma once

#include <initializer_list>
#include <type_traits>
#include <utility>

#include "tessera/vector_ops.h"

namespace tessera {

namespace detail {
/// What `x_ref[...]` gives (ref.h): a leaf that reads the indexed view where it is used, and
/// that Pallas' `o_ref[...] = e` / `o_ref[...] += e` write through. It reads a ref, so a named
/// one cannot be used (TESSERA_CHECK_NAMED): `jnp::Value x = x_ref[pl::ellipsis];` keeps a copy.
template <class T, MemorySpace S>
struct RefItem : RefLeaf<T, S> {
  RefItem(const RefItem&) = default;
  explicit RefItem(pl::Ref<T, S> r) : RefLeaf<T, S>{{}, std::move(r)} {}

  // `o[...] = x[...]`: writes the elements (a named item on the right reads late: refused).
  [[gnu::always_inline]] RefItem& operator=(RefItem&& other) {
    this->ref = std::move(other);
    return *this;
  }
  RefItem& operator=(const RefItem& other) {
    static_assert(sizeof(T) == 0,
                  "tessera: this named x_ref[...] reads the ref where it is used, not where it "
                  "was written; keep a copy with jnp::Value x = x_ref[pl::ellipsis];");
    return *this = RefItem(other);
  }
  template <class E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, RefItem>) [[gnu::always_inline]] RefItem&
  operator=(E&& e) {
    this->ref = std::forward<E>(e);
    return *this;
  }
#define TESSERA_ITEM_COMPOUND(op_)                      \
  template <class E>                                    \
  [[gnu::always_inline]] RefItem& operator op_(E&& e) { \
    this->ref op_ std::forward<E>(e);                   \
    return *this;                                       \
  }
  TESSERA_ITEM_COMPOUND(+=)
  TESSERA_ITEM_COMPOUND(-=)
  TESSERA_ITEM_COMPOUND(*=)
  TESSERA_ITEM_COMPOUND(/=)
#undef TESSERA_ITEM_COMPOUND
};
}  // namespace detail

namespace pl {
template <class T, MemorySpace Space>
inline auto Ref<T, Space>::operator[](pl::Ellipsis) const {
  static_assert(is_compute_space(Space),
                "tessera: x_ref[...] loads from VMEM or SMEM; a Ref in HBM/ANY has to be copied "
                "into a VMEM buffer first (pltpu::sync_copy or a BlockSpec)");
  return detail::RefItem<T, Space>(Ref(*this, 0));
}
template <class T, MemorySpace Space>
inline auto Ref<T, Space>::operator[](detail::Indexer index) const {
  static_assert(is_compute_space(Space),
                "tessera: x_ref[...] loads from VMEM or SMEM; a Ref in HBM/ANY has to be copied "
                "into a VMEM buffer first (pltpu::sync_copy or a BlockSpec)");
  return detail::RefItem<T, Space>(at_n({index}, {}));
}
template <class T, MemorySpace Space>
inline auto Ref<T, Space>::operator[](std::initializer_list<detail::Indexer> indices) const {
  static_assert(is_compute_space(Space),
                "tessera: x_ref[...] loads from VMEM or SMEM; a Ref in HBM/ANY has to be copied "
                "into a VMEM buffer first (pltpu::sync_copy or a BlockSpec)");
  return detail::RefItem<T, Space>(at_n(indices, {}));
}
}  // namespace pl

}  // namespace tessera
