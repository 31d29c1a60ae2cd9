// The checked engine's shadow memory: byte runs of strided views, the "written" shadow of VMEM,
// SMEM and HBM outputs, poison, naming memory for messages, moving a copy's bytes with their
// shadow, and the compute hooks (vector assignment, jnp::dot, Ref element access, fresh and
// padded buffers) that raise kUninitialized.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "check/checked_state.h"
#include "core/messages.h"
#include "native/native_engine.h"
#include "tessera/error.h"

namespace tessera::detail {

Runs runs_of(const void* data, DType dtype, const Shape& shape, const SmallVec& strides) {
  Runs r;
  if (shape.size() == 0 || data == nullptr) return r;
  const int64_t item = itemsize(dtype);
  struct Ax {
    int64_t n;
    int64_t s;
  };
  std::vector<Ax> ax;
  int64_t lo_off = 0;
  int64_t hi_off = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    const int64_t s = strides[d] * item;
    ax.push_back({shape[d], s});
    (s < 0 ? lo_off : hi_off) += (shape[d] - 1) * s;
  }
  const auto base = reinterpret_cast<uintptr_t>(data);
  r.lo = base + static_cast<uintptr_t>(lo_off);
  r.hi = base + static_cast<uintptr_t>(hi_off + item);
  std::sort(ax.begin(), ax.end(),
            [](const Ax& a, const Ax& b) { return std::llabs(a.s) > std::llabs(b.s); });
  int64_t run = item;
  while (!ax.empty() && ax.back().s == run) {
    run *= ax.back().n;
    ax.pop_back();
  }
  int64_t rows = 1;
  for (const Ax& a : ax) {
    rows *= a.n;
    if (rows > kMaxRuns) break;
  }
  if (rows > kMaxRuns) {
    r.v.push_back({r.lo, r.hi});
    return r;
  }
  r.v.reserve(static_cast<size_t>(rows));
  std::vector<int64_t> idx(ax.size(), 0);
  int64_t off = 0;
  for (;;) {
    const uintptr_t p = base + static_cast<uintptr_t>(off);
    r.v.push_back({p, p + static_cast<uintptr_t>(run)});
    int k = static_cast<int>(ax.size()) - 1;
    for (; k >= 0; --k) {
      const size_t ku = static_cast<size_t>(k);
      if (++idx[ku] < ax[ku].n) {
        off += ax[ku].s;
        break;
      }
      off -= (ax[ku].n - 1) * ax[ku].s;
      idx[ku] = 0;
    }
    if (k < 0) break;
  }
  std::sort(r.v.begin(), r.v.end(), [](const Run& a, const Run& b) { return a.lo < b.lo; });
  size_t w = 0;
  for (size_t i = 1; i < r.v.size(); ++i) {
    if (r.v[i].lo <= r.v[w].hi) {
      r.v[w].hi = std::max(r.v[w].hi, r.v[i].hi);
    } else {
      r.v[++w] = r.v[i];
    }
  }
  r.v.resize(w + 1);
  return r;
}

Runs runs_of(const RawRef& r) { return runs_of(r.data, r.dtype, r.shape, r.strides); }

// The first byte both cover, or 0.
uintptr_t overlap(const Runs& a, const Runs& b) {
  if (a.empty() || b.empty() || a.hi <= b.lo || b.hi <= a.lo) return 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.v.size() && j < b.v.size()) {
    if (a.v[i].hi <= b.v[j].lo) {
      ++i;
    } else if (b.v[j].hi <= a.v[i].lo) {
      ++j;
    } else {
      return std::max(a.v[i].lo, b.v[j].lo);
    }
  }
  return 0;
}

void mark_range(Region& reg, uintptr_t lo, uintptr_t hi, uint8_t v) {
  lo = std::max(lo, reg.base);
  hi = std::min(hi, reg.base + static_cast<uintptr_t>(reg.bytes));
  if (lo >= hi) return;
  uint8_t* first = reg.at(lo);
  uint8_t* last = reg.at(hi - 1);
  std::memset(first, v, static_cast<size_t>(last - first + 1));
  if (v != 0) reg.touched(last);
}

void mark(Region& reg, const Runs& runs, uint8_t v) {
  if (reg.init == nullptr) return;
  for (const Run& r : runs.v) mark_range(reg, r.lo, r.hi, v);
}

namespace {
// The first shadow byte of [p, end) that is not kDefined, or null.
const uint8_t* find_undefined(const uint8_t* p, const uint8_t* end) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  while (p < end && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    if (*p != kDefined) return p;
    ++p;
  }
  for (; p + 8 <= end; p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if (w != kOnes) break;
  }
  for (; p < end; ++p) {
    if (*p != kDefined) return p;
  }
  return nullptr;
}
}  // namespace

uintptr_t first_unwritten_range(const Region& reg, uintptr_t lo, uintptr_t hi) {
  lo = std::max(lo, reg.base);
  hi = std::min(hi, reg.base + static_cast<uintptr_t>(reg.bytes));
  if (lo >= hi) return 0;
  const uint8_t* first = reg.at(lo);
  const uint8_t* last = reg.at(hi - 1);
  const uint8_t* z = find_undefined(first, last + 1);
  if (z == nullptr) return 0;
  const auto idx = static_cast<uintptr_t>(z - reg.init);
  return std::max(lo, reg.base + (idx << reg.shift));
}

uint8_t shadow_state(const Region& reg, uintptr_t p, int item) {
  if (reg.init == nullptr || !reg.contains(p)) return kDefined;
  const uintptr_t hi =
      std::min(p + static_cast<uintptr_t>(item), reg.base + static_cast<uintptr_t>(reg.bytes));
  const uint8_t* z = find_undefined(reg.at(p), reg.at(hi - 1) + 1);
  return z == nullptr ? kDefined : *z;
}

uintptr_t first_unwritten(const Region& reg, const Runs& runs) {
  if (reg.init == nullptr) return 0;
  for (const Run& r : runs.v) {
    if (const uintptr_t p = first_unwritten_range(reg, r.lo, r.hi)) return p;
  }
  return 0;
}

void fill_poison(void* data, int64_t bytes, DType dtype, pltpu::UninitializedMemory mode) {
  if (bytes <= 0 || data == nullptr) return;
  if (mode == pltpu::UninitializedMemory::zero) {
    std::memset(data, 0, static_cast<size_t>(bytes));
    return;
  }
  auto fill = [&](auto v) {
    using V = decltype(v);
    V* p = static_cast<V*>(data);
    const int64_t n = bytes / static_cast<int64_t>(sizeof(V));
    std::fill(p, p + n, v);
  };
  switch (dtype) {
    case DType::kFloat32:
      fill(std::numeric_limits<float>::quiet_NaN());
      break;
    case DType::kBFloat16:
      fill(uint16_t{0x7fc0});
      break;
    case DType::kInt32:
      fill(std::numeric_limits<int32_t>::max());
      break;
    case DType::kInt8:
      fill(std::numeric_limits<int8_t>::max());
      break;
    case DType::kBool:
      fill(uint8_t{1});
      break;
    case DType::kInt16:
      fill(std::numeric_limits<int16_t>::max());
      break;
    case DType::kUInt8:
      fill(std::numeric_limits<uint8_t>::max());
      break;
    case DType::kUInt16:
      fill(std::numeric_limits<uint16_t>::max());
      break;
    case DType::kUInt32:
      fill(std::numeric_limits<uint32_t>::max());
      break;
    case DType::kFloat16:
      fill(uint16_t{0x7e00});  // quiet NaN
      break;
    case DType::kFloat8E4M3FN:
      fill(uint8_t{0x7f});  // its NaN
      break;
    case DType::kFloat8E5M2:
      fill(uint8_t{0x7e});  // quiet NaN
      break;
    case DType::kFloat8E4M3B11FNUZ:
      fill(uint8_t{0x80});  // its one NaN
      break;
    case DType::kInt4:  // the dtype's max, stored as ml_dtypes does (low bits)
      fill(int4(7).bits);
      break;
    case DType::kUInt4:
      fill(uint4(15).bits);
      break;
    case DType::kInt2:
      fill(int2(1).bits);
      break;
    case DType::kUInt2:
      fill(uint2(3).bits);
      break;
    default:
      std::memset(data, 0xff, static_cast<size_t>(bytes));
  }
}
std::string elem_at(uintptr_t addr, uintptr_t base, DType dtype, const Shape& shape) {
  const int64_t item = itemsize(dtype);
  const int64_t flat = static_cast<int64_t>(addr - base) / item;
  if (shape.rank() == 0) return "";
  return fmt::format(" element {}", unravel_index(flat, shape));
}

HbmBuffer* hbm_of(CheckedLaunch& L, uintptr_t p) {
  for (auto& b : L.hbm) {
    if (b->region.contains(p)) return b.get();
  }
  return nullptr;
}

// Names the memory at `addr` for messages: "output 0 float32(256,) element (130,)", "VMEM
// scratch #1 VMEM<float32>(8, 128) element (0, 3)", "a VMEM buffer (pipeline window, run_scoped
// or temporary) at byte 4096".
std::string describe(const CoreContext& ctx, uintptr_t addr) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  if (HbmBuffer* b = hbm_of(L, addr)) {
    return fmt::format("{}{} {} {}{} {}{}",
                       b->device >= 0 && L.mesh != nullptr
                           ? fmt::format("device {}'s ", L.mesh->name(b->device))
                           : std::string(),
                       to_string(b->space), b->is_output ? "output" : "input", b->index,
                       b->core >= 0 ? fmt::format(" (core {}'s copy)", b->core) : std::string(),
                       std::string(dtype_name(b->dtype)) + b->shape.to_string(),
                       elem_at(addr, b->region.base, b->dtype, b->shape));
  }
  const LaunchSpec& spec = *L.spec;
  {
    // Other cores set and reset their regions as they begin and finish (checked.cc).
    std::lock_guard<std::mutex> regions(L.regions_mu);
    for (const auto& other : L.cores) {
      // Another core's memory (a remote copy's destination on a device mesh).
      if (other.get() == &cc || !(other->vmem.contains(addr) || other->smem.contains(addr))) {
        continue;
      }
      const bool vmem = other->vmem.contains(addr);
      return fmt::format("{} of {} at byte offset {}", vmem ? "VMEM" : "SMEM",
                         core_name(L, other->core),
                         addr - (vmem ? other->vmem.base : other->smem.base));
    }
  }
  for (const Region* reg : {&cc.vmem, &cc.smem}) {
    if (!reg->contains(addr)) continue;
    const MemorySpace space = reg == &cc.vmem ? MemorySpace::VMEM : MemorySpace::SMEM;
    const int64_t off = static_cast<int64_t>(addr - reg->base);
    for (size_t i = 0; i < spec.scratch.size(); ++i) {
      const ScratchRequest& r = spec.scratch[i];
      if (r.space != space || off < spec.offsets[i] || off >= spec.offsets[i] + r.bytes) continue;
      return fmt::format(
          "{} scratch #{} {}<{}>{}{}", to_string(space), i, to_string(space), dtype_name(r.dtype),
          r.shape.to_string(),
          elem_at(addr, reg->base + static_cast<uintptr_t>(spec.offsets[i]), r.dtype, r.shape));
    }
    for (auto it = cc.names.rbegin(); it != cc.names.rend(); ++it) {
      if (addr >= it->lo && addr < it->hi) {
        return fmt::format("{} (byte {} of it)", it->what, addr - it->lo);
      }
    }
    return fmt::format(
        "a {} buffer (a pipeline window or a run_scoped buffer) at byte offset {} "
        "of the core's {}",
        to_string(space), off, to_string(space));
  }
  return fmt::format("memory at {:#x}", addr);
}

Region* region_of(CoreContext& ctx, uintptr_t p) {
  CheckedCore& cc = core_of(ctx);
  if (cc.vmem.contains(p)) return &cc.vmem;
  if (cc.smem.contains(p)) return &cc.smem;
  if (HbmBuffer* b = hbm_of(*cc.launch, p)) return &b->region;
  if (cc.launch->devices > 1) {
    // Another core's VMEM or SMEM: a remote copy's destination on a device mesh.
    for (const auto& other : cc.launch->cores) {
      if (other->vmem.contains(p)) return &other->vmem;
      if (other->smem.contains(p)) return &other->smem;
    }
  }
  return nullptr;
}

bool is_hbm(CheckedCore& cc, uintptr_t p) { return hbm_of(*cc.launch, p) != nullptr; }

std::string dma_text(const CoreContext& ctx, const Dma& d) {
  if (!d.remote.empty()) return d.remote;
  return fmt::format("the async copy started at {} ({} {} -> {}, {} bytes)",
                     format_location(d.started), dtype_name(d.src.dtype), d.src.shape.to_string(),
                     describe(ctx, reinterpret_cast<uintptr_t>(d.dst.data)), d.bytes);
}
// Copies the shadow of src's elements to dst's (same shapes). Elements of an HBM output that no
// core has written yet arrive undefined with an origin that says so (`where`: the copy), so that
// a later error can name the copy as the likely race with the core that writes them.
void copy_shadow(CoreContext& ctx, const RawRef& src, const RawRef& dst, const Runs& dst_runs,
                 SourceLocation where) {
  Region* dreg = region_of(ctx, dst_runs.lo);
  if (dreg == nullptr || dreg->init == nullptr) return;
  Region* sreg = region_of(ctx, reinterpret_cast<uintptr_t>(src.data));
  if (sreg == nullptr || sreg->init == nullptr) {
    mark(*dreg, dst_runs, kDefined);
    return;
  }
  const int rank = src.shape.rank();
  const int64_t item = itemsize(src.dtype);
  const auto s0 = reinterpret_cast<uintptr_t>(src.data);
  const auto d0 = reinterpret_cast<uintptr_t>(dst.data);
  const HbmBuffer* from_output = hbm_of(*core_of(ctx).launch, s0);
  if (from_output != nullptr && !from_output->is_output) from_output = nullptr;
  uint8_t early_read = kUnwritten;  // the origin of "read before any core wrote it", once made
  auto element = [&](uintptr_t sp, uintptr_t dp) {
    // The element's state travels: defined, never written, or undefined with its origin.
    uint8_t state = shadow_state(*sreg, sp, static_cast<int>(item));
    if (state == kUnwritten && from_output != nullptr) {
      if (early_read == kUnwritten) {
        early_read = add_origin_locked(
            *core_of(ctx).launch,
            Origin{where, ctx.core, ctx.grid_step, describe(ctx, sp), /*early_hbm_read=*/true});
      }
      state = early_read;
    }
    mark_range(*dreg, dp, dp + static_cast<uintptr_t>(item), state);
  };
  if (rank == 0) {
    element(s0, d0);
    return;
  }
  const int64_t n = src.shape[rank - 1];
  const int64_t ss = src.strides[rank - 1] * item;
  const int64_t ds = dst.strides[rank - 1] * item;
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (;;) {
    int64_t so = 0;
    int64_t dof = 0;
    for (int a = 0; a < rank - 1; ++a) {
      so += idx[static_cast<size_t>(a)] * src.strides[a] * item;
      dof += idx[static_cast<size_t>(a)] * dst.strides[a] * item;
    }
    const uintptr_t sp = s0 + static_cast<uintptr_t>(so);
    const uintptr_t dp = d0 + static_cast<uintptr_t>(dof);
    const auto len = static_cast<uintptr_t>(n * item);
    if (ss == item && ds == item && first_unwritten_range(*sreg, sp, sp + len) == 0) {
      mark_range(*dreg, dp, dp + len, kDefined);  // the common case: a defined row
    } else if (ss == item && ds == item && sreg->shift == dreg->shift) {
      std::memcpy(dreg->at(dp), sreg->at(sp), static_cast<size_t>(len >> dreg->shift));
      dreg->touched(dreg->at(dp + len - 1));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        element(sp + static_cast<uintptr_t>(i * ss), dp + static_cast<uintptr_t>(i * ds));
      }
    }
    int a = rank - 2;
    for (; a >= 0; --a) {
      if (++idx[static_cast<size_t>(a)] < src.shape[a]) break;
      idx[static_cast<size_t>(a)] = 0;
    }
    if (a < 0) break;
  }
}

// Moves a copy's bytes and their shadow. HBM shadows are shared: under the mutex.
void move_bytes(CoreContext& ctx, const RawRef& src, const RawRef& dst, const Runs& src_runs,
                const Runs& dst_runs, SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  if (cc.launch->mesh != nullptr && (is_hbm(cc, dst_runs.lo) || is_hbm(cc, src_runs.lo))) {
    // On a device mesh other devices' copies land in HBM too: the bytes move under the mutex,
    // so that a race between copies, which the books report, never becomes a data race here.
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    copy_shadow(ctx, src, dst, dst_runs, where);
    strided_copy(src, dst);
    return;
  }
  if (is_hbm(cc, dst_runs.lo) || is_hbm(cc, src_runs.lo)) {
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    copy_shadow(ctx, src, dst, dst_runs, where);
  } else {
    copy_shadow(ctx, src, dst, dst_runs, where);
  }
  strided_copy(src, dst);  // the native engine moves the bytes
}

void execute(CoreContext& ctx, Dma& d) {
  move_bytes(ctx, d.src, d.dst, d.src_runs, d.dst_runs, d.started);
  d.executed = true;
  d.sem->fetch_add(d.bytes);
}
CheckedCore& core_of(const CoreContext& ctx) { return *static_cast<CheckedCore*>(ctx.engine_core); }
void checked_dot(CoreContext& ctx, const DotCall& call, const RawRef& dst, bool accumulate) {
  CheckedCore& cc = core_of(ctx);
  const SourceLocation where = statement_site(call.where);
  const pltpu::InterpretParams& P = cc.launch->params;
  if (cc.launch->chip && !cc.launch->chip->is_matmul_supported(call.lhs.dtype, call.rhs.dtype)) {
    raise(ErrorKind::kUnsupported, call.op, where,
          fmt::format("a {} x {} matmul is not supported by the MXU of {} (pltpu::TpuInfo::"
                      "is_matmul_supported); convert the operands with astype first",
                      dtype_name(call.lhs.dtype), dtype_name(call.rhs.dtype), P.chip));
  }
  auto read = [&](const RawRef& r) {
    const Runs runs = runs_of(r);
    check_compute_vs_dma(ctx, runs, false, call.op, where);
    if (!P.allow_uninitialized_reads) {
      if (Region* reg = region_of(ctx, runs.lo)) {
        if (const uintptr_t p = first_unwritten(*reg, runs)) {
          settle_before_uninitialized(ctx, shadow_state(*reg, p, 1), call.op, where);
          raise(ErrorKind::kUninitialized, call.op, where,
                fmt::format("an undefined element reaches the dot: it reads {}; an accumulator "
                            "must be initialised before `acc += jnp::dot(...)` (e.g. under "
                            "`if (pl::program_id(k) == 0)`), and operands written first",
                            undefined_text(ctx, p, shadow_state(*reg, p, 1))));
        }
      }
    }
  };
  read(call.lhs);
  read(call.rhs);
  if (accumulate) read(dst);
  const Runs d = runs_of(dst);
  check_compute_vs_dma(ctx, d, true, call.op, where);
  if (Region* reg = region_of(ctx, d.lo)) mark(*reg, d, kDefined);
}

void checked_element(CoreContext& ctx, const void* p, int size, bool read, SourceLocation where) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  Runs r;
  r.v.push_back({a, a + static_cast<uintptr_t>(size)});
  r.lo = a;
  r.hi = a + static_cast<uintptr_t>(size);
  check_compute_vs_dma(ctx, r, !read, read ? "Ref element read" : "Ref element write", where);
  Region* reg = region_of(ctx, a);
  if (reg == nullptr) return;
  if (!read) {
    mark(*reg, r, kDefined);
    return;
  }
  if (!core_of(ctx).launch->params.allow_uninitialized_reads && first_unwritten(*reg, r) != 0) {
    settle_before_uninitialized(ctx, shadow_state(*reg, a, size), "Ref element read", where);
    raise(ErrorKind::kUninitialized, "Ref element read", where,
          fmt::format("reads {}; a scalar read of garbage steers the kernel by garbage: write "
                      "it first",
                      undefined_text(ctx, a, shadow_state(*reg, a, size))));
  }
}

namespace {
// Fills `bytes` at `data` with poison and sets their shadow in their region to `v` (mark()).
void poison_and_mark(CoreContext& ctx, void* data, int64_t bytes, DType dtype, uint8_t v) {
  fill_poison(data, bytes, dtype, core_of(ctx).launch->params.uninitialized_memory);
  Runs r;
  const auto a = reinterpret_cast<uintptr_t>(data);
  r.v.push_back({a, a + static_cast<uintptr_t>(bytes)});
  r.lo = a;
  r.hi = r.v[0].hi;
  if (Region* reg = region_of(ctx, a)) mark(*reg, r, v);
}
}  // namespace

void checked_fresh(CoreContext& ctx, void* data, int64_t bytes, DType dtype, std::string what) {
  CheckedCore& cc = core_of(ctx);
  const auto lo = reinterpret_cast<uintptr_t>(data);
  if (cc.names.empty() || cc.names.back().lo != lo || cc.names.back().what != what) {
    if (cc.names.size() >= 64) cc.names.erase(cc.names.begin());
    cc.names.push_back({lo, lo + static_cast<uintptr_t>(bytes), std::move(what)});
  }
  poison_and_mark(ctx, data, bytes, dtype, kUnwritten);
}

void checked_pad(CoreContext& ctx, void* data, int64_t bytes, DType dtype) {
  poison_and_mark(ctx, data, bytes, dtype, kDefined);
}
}  // namespace tessera::detail
