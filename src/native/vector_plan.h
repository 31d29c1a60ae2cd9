// Internal: the evaluator's form of an ExprProgram (see vector_kernels.cc).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/detail/expr_program.h"
#include "tessera/detail/small_vec.h"

namespace tessera::detail {
struct PrefetchQueue;
namespace plan {

inline constexpr int64_t kTile = 512;

/// A node as the evaluator sees it: per-axis strides already broadcast and coalesced.
struct Node {
  OpCode op;
  DType dtype;
  bool flt;  // lanes are float (else int32)
  int a, b, c;
  int64_t iconst = 0;               // kIntegerPow: the exponent
  const std::byte* data = nullptr;  // kLoad
  SmallVec stride;                  // kLoad: element strides; kIota: coefficients; per axis
  float fval = 0;
  int32_t ival = 0;
};

struct Plan {
  bool stream = false;                // the destination takes streaming (non-temporal) stores
  PrefetchQueue* prefetch = nullptr;  // a pipeline's lines to prefetch, drained per tile
  SmallVec extent;                    // coalesced axes, outermost first; at least one
  std::vector<Node> nodes;
  std::byte* dst = nullptr;
  DType dst_dtype = DType::kFloat32;
  SmallVec dst_stride;
};

}  // namespace plan

/// The fused form of an evaluation (vector_fused-inl.h): a float32 destination with contiguous
/// rows, written from one or two float32 operands, each a row of a ref or a single value.
struct FusedDst {
  int nd = 1;                       // axes, outermost first; the last is the contiguous row
  const int64_t* extent = nullptr;  // per axis
  float* data = nullptr;
  const int64_t* stride = nullptr;  // per axis, in elements (the last is 1)
  bool stream = false;              // streaming (non-temporal) stores
  PrefetchQueue* prefetch = nullptr;
};
// kIota (the fused trees' only): an iota, whose `stride` holds its coefficients per axis and
// `value` the bits of an int32 offset added to it (vector_tree_compile-inl.h).
enum class FusedArg : uint8_t { kRow, kScalar, kIota };
struct FusedOperand {
  FusedArg kind = FusedArg::kScalar;
  const float* data = nullptr;      // a ref's first element (null for a constant)
  const int64_t* stride = nullptr;  // a ref's element strides per axis (null for a constant)
  float value = 0;                  // the constant
};

/// d = a `op` b on the fused path, with the best SIMD target of this CPU; false (nothing done)
/// for an op it does not fuse (add, sub, mul, div, max and min are fused) or when neither
/// operand is a row.
bool run_fused_binary(const FusedDst& d, OpCode op, const FusedOperand& a, const FusedOperand& b);
/// d = a float32 iota whose value at an index is the sum of index * coef over d's axes (`op`
/// kIota), or that iota `op` value (`iota_first`) or value `op` iota for op add, sub or mul, on
/// the fused path with the best SIMD target of this CPU; false (nothing done) for another op.
bool run_fused_iota(const FusedDst& d, const int64_t* coef, OpCode op, float value,
                    bool iota_first);

/// The calling thread's lane buffers for a plan of `nodes` nodes: one kTile buffer per node,
/// 64-byte aligned, reused across calls (vector_evaluate.cc).
float* lane_buffers(size_t nodes);

/// Runs a plan with the best SIMD target of this CPU (vector_kernels.cc). `lanes` holds one
/// kTile buffer per node, 64-byte aligned; null: the calling thread's lane_buffers, taken only
/// when the plan is evaluated tile by tile (the fused path needs none).
void run_plan(const plan::Plan& p, float* lanes = nullptr);

/// Reduces a contiguous row-major array of 32-bit lanes of dtype `lane` (float32, int32 or
/// uint32) of shape `extent` over the axes whose `reduced` flag is set, into a contiguous result
/// (the kept axes in order); kArgMax/kArgMin write int32 indices along the (single) reduced axis
/// group (vector_reduce_kernels.cc).
void run_reduce(OpCode op, DType lane, const void* in, void* out, const SmallVec& extent,
                const SmallVec& reduced);
/// Forgets run_reduce's resolved target (after the supported targets changed).
void reset_reduce_dispatch();

/// The SIMD targets this binary was built for and this CPU supports, best first as Highway
/// orders its bits (HWY_* bit, name). For tests.
std::vector<std::pair<int64_t, std::string>> vector_targets();
/// Test hook: later evaluations use only `targets` (Highway's HWY_* bits; 0 restores what the
/// CPU supports). Not thread-safe: call it while no evaluation runs.
void set_vector_targets_for_test(int64_t targets);
/// Whether plans may take the fused path (EvaluateFused, vector_kernels.cc); tests turn it off to
/// compare a fused result with the tile evaluator's. Relaxed: set it while no evaluation runs.
inline std::atomic<bool> g_fused_path_for_test{true};
/// How many evaluations the calling thread's fused trees took (vector_fused_tree-inl.h): tests
/// read it around a statement to know that it was fused. The thread's own, so that counting costs
/// the cores no shared cache line.
inline thread_local int64_t g_fused_trees_for_test = 0;
}  // namespace tessera::detail
