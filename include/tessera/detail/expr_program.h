// Internal: the flat, type-erased form of an in-kernel expression. Expression templates in
// vector_ops.h check types at compile time and then emit one ExprProgram per assignment; the
// native engine (src/native/vector_kernels.cc, Highway with runtime dispatch) evaluates it tile
// by tile, so an elementwise chain makes no full-size temporaries.
#pragma once

#include <cstdint>
#include <source_location>
#include <vector>

#include "tessera/detail/value_storage.h"
#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/shape.h"

namespace tessera::detail {

/// The ops, in the order of detail/op_codes.inc (non-elementwise ones last).
enum class OpCode : uint8_t {
#define TESSERA_OP(code, name, call) code,
#include "tessera/detail/op_codes.inc"
#undef TESSERA_OP
};

/// True for the ops that need their operand evaluated into a temporary first.
constexpr bool is_non_elementwise(OpCode op) noexcept { return op >= OpCode::kReduceSum; }

/// Display name of an op ("add", ...), for messages and traces.
const char* op_name(OpCode op) noexcept;
/// The jnp/lax call that makes an op ("jnp.sum", "pltpu.roll"), as errors name it.
const char* op_call(OpCode op) noexcept;

struct ExprNode {
  OpCode op = OpCode::kConst;
  DType dtype = DType::kFloat32;  // the node's result dtype (rounding happens per node)
  int a = -1;                     // operand node indices (earlier in the program)
  int b = -1;
  // kLoad
  const void* data = nullptr;
  MemorySpace space = MemorySpace::VMEM;
  Shape shape;       // kLoad: the ref's shape; kIota: the iota's own shape
  SmallVec strides;  // kLoad: element strides
  // kConst
  double fconst = 0.0;
  int64_t iconst = 0;
  // kIota, kRoll
  int axis = 0;
  // kRoll with a stride (pltpu.roll's stride/stride_axis): slice i along stride_axis rolls by
  // iconst + i * roll_stride (roll_stride normalised to 0..n-1); stride_axis -1: no stride
  int stride_axis = -1;
  int64_t roll_stride = 0;
  // kSelect: the mask operand
  int c = -1;
  // non-elementwise nodes
  int sub_begin = -1;  // first node of operand a's subtree (nodes sub_begin..a)
  Shape out_shape;
  std::source_location where;  // the jnp/lax call that made the node
};

/// Nodes in evaluation order; the last one is the result. Programs are built per assignment, so
/// the node storage is a per-thread buffer that keeps its capacity (no allocation per assignment
/// once warm). Programs nest: a node whose emit computes something first (a dot, a concatenate)
/// may build and evaluate a program of its own while the outer one is being built; each level
/// has its own buffer. `keep` holds the storage of temporaries that the program's loads read
/// (released when the program ends).
struct ExprProgram {
  /// One nesting level's buffers (per thread, reused).
  struct Level {
    std::vector<ExprNode> nodes;
    std::vector<ValueStorage> keep;
  };

 private:
  Level& level_;

 public:
  std::vector<ExprNode>& nodes;
  std::vector<ValueStorage>& keep;
  std::source_location where;  // the best user location known for the expression

  ExprProgram();
  ~ExprProgram();
  ExprProgram(const ExprProgram&) = delete;
  ExprProgram& operator=(const ExprProgram&) = delete;

  int add(ExprNode n) {
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  }
  /// A new node at the end, built in place; `index()` of it is nodes.size() - 1.
  ExprNode& emplace() { return nodes.emplace_back(); }
  int last() const noexcept { return static_cast<int>(nodes.size()) - 1; }
};

struct RawRef;

/// Evaluates `program` into `dst` (broadcasting the result to dst's shape). Throws kShapeMismatch
/// when a leaf does not broadcast to dst's shape. Handles a dst that overlaps a leaf. Non-
/// elementwise nodes are evaluated into temporaries first: inside a kernel they come from the
/// core's VMEM above vmem_top and count against the budget (kCapacityExceeded), outside from the
/// heap.
void evaluate(const ExprProgram& program, const RawRef& dst);

}  // namespace tessera::detail
