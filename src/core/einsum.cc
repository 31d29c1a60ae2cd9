// jnp::einsum's subscripts, mapped onto one batched product (tessera/dot.h): which letters are
// batch dimensions, which one is contracted, which are free, and the order of the output.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include "tessera/detail/runtime.h"
#include "tessera/dot.h"

namespace tessera::detail {

namespace {

struct Subscripts {
  std::string lhs, rhs, out;
};

[[noreturn]] void bad(std::string_view spec, std::source_location where, const std::string& why) {
  raise(ErrorKind::kInvalidArgument, "jnp.einsum", where,
        fmt::format("subscripts \"{}\": {}", spec, why));
}

Subscripts split(std::string_view spec, std::source_location where) {
  std::string clean;
  for (char ch : spec) {
    if (ch != ' ') clean += ch;
  }
  Subscripts s;
  const size_t arrow = clean.find("->");
  const std::string inputs = clean.substr(0, arrow);
  const size_t comma = inputs.find(',');
  if (comma == std::string::npos || inputs.find(',', comma + 1) != std::string::npos) {
    bad(spec, where,
        "jnp::einsum takes two operands, so the inputs are two subscripts joined by "
        "a comma (\"ij,jk->ik\")");
  }
  s.lhs = inputs.substr(0, comma);
  s.rhs = inputs.substr(comma + 1);
  if (arrow != std::string::npos) {
    s.out = clean.substr(arrow + 2);
  } else {
    // numpy's implicit output: the letters that appear once, in alphabetical order.
    for (char ch = 'A'; ch <= 'z'; ++ch) {
      const auto n = std::count(inputs.begin(), inputs.end(), ch);
      if (n == 1 && std::isalpha(static_cast<unsigned char>(ch))) s.out += ch;
    }
  }
  for (const std::string* part : {&s.lhs, &s.rhs, &s.out}) {
    for (size_t i = 0; i < part->size(); ++i) {
      const char ch = (*part)[i];
      if (!std::isalpha(static_cast<unsigned char>(ch))) {
        bad(spec, where,
            fmt::format("'{}' is not a letter (ellipses and other characters are not "
                        "supported: name every axis)",
                        ch));
      }
      if (part->find(ch, i + 1) != std::string::npos) {
        bad(spec, where,
            fmt::format("'{}' appears twice in \"{}\" (diagonals and traces are not "
                        "products: take them with jnp functions first)",
                        ch, *part));
      }
    }
  }
  return s;
}

}  // namespace

void parse_einsum(std::string_view spec, int lhs_rank, int rhs_rank, lax::DotDimensionNumbers& dims,
                  SmallVec& out_perm, std::source_location where) {
  const Subscripts s = split(spec, where);
  if (static_cast<int>(s.lhs.size()) != lhs_rank || static_cast<int>(s.rhs.size()) != rhs_rank) {
    bad(spec, where,
        fmt::format("the operands have ranks {} and {}, but the subscripts name {} "
                    "and {} axes",
                    lhs_rank, rhs_rank, s.lhs.size(), s.rhs.size()));
  }
  std::string batch, contracted, lfree, rfree;
  for (char ch : s.out) {
    const bool l = s.lhs.find(ch) != std::string::npos;
    const bool r = s.rhs.find(ch) != std::string::npos;
    if (l && r) batch += ch;
    if (l && !r) lfree += ch;
    if (!l && r) rfree += ch;
    if (!l && !r) bad(spec, where, fmt::format("output letter '{}' names no input axis", ch));
  }
  for (const std::string* in : {&s.lhs, &s.rhs}) {
    for (char ch : *in) {
      if (s.out.find(ch) != std::string::npos) continue;
      const std::string& other = in == &s.lhs ? s.rhs : s.lhs;
      if (other.find(ch) == std::string::npos) {
        bad(spec, where,
            fmt::format("'{}' is summed over one operand only; sum it first with "
                        "jnp::sum, then take the product",
                        ch));
      }
      if (in == &s.lhs) contracted += ch;
    }
  }
  if (contracted.size() != 1) {
    bad(spec, where,
        contracted.empty()
            ? std::string("no letter is contracted (an outer product); write it with "
                          "broadcasting instead, x[:, None] * y[None, :]")
            : fmt::format("{} letters are contracted (\"{}\"); a product contracts exactly one "
                          "(reshape the operands to merge them)",
                          contracted.size(), contracted));
  }
  if (lfree.size() > 1 || rfree.size() > 1) {
    bad(spec, where,
        "an operand has more than one free letter (one that is in the output and not "
        "in the other operand); a product takes at most one per operand");
  }
  if (batch.size() > static_cast<size_t>(lax::DotDimensionNumbers::kMaxDims)) {
    bad(spec, where,
        fmt::format("{} batch letters; at most {}", batch.size(),
                    lax::DotDimensionNumbers::kMaxDims));
  }
  dims = {};
  dims.contracting.lhs = {static_cast<int>(s.lhs.find(contracted[0]))};
  dims.contracting.rhs = {static_cast<int>(s.rhs.find(contracted[0]))};
  for (char ch : batch) {
    dims.batch.lhs.dims[dims.batch.lhs.size++] = static_cast<int>(s.lhs.find(ch));
    dims.batch.rhs.dims[dims.batch.rhs.size++] = static_cast<int>(s.rhs.find(ch));
  }
  // The product's natural axes are the batch letters (in output order), the lhs free letter and
  // the rhs free one; the output may order them differently.
  const std::string natural = batch + lfree + rfree;
  SmallVec perm;
  bool identity = true;
  for (size_t i = 0; i < s.out.size(); ++i) {
    const auto at = static_cast<int64_t>(natural.find(s.out[i]));
    identity = identity && at == static_cast<int64_t>(i);
    perm.push_back(at);
  }
  if (!identity) out_perm = std::move(perm);
}

}  // namespace tessera::detail
