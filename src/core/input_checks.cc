// Shape validation and TESSERA_* environment parsing: the one place where user-given extents and
// environment strings become checked numbers (docs/design.md, "Errors and locations").
#include "core/input_checks.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "tessera/detail/checked_math.h"
#include "tessera/detail/runtime.h"
#include "tessera/error.h"
#include "tessera/shape.h"

namespace tessera::detail {

namespace {
std::atomic<unsigned> g_environment_generation{1};
}  // namespace

unsigned environment_generation() noexcept {
  return g_environment_generation.load(std::memory_order_acquire);
}

void reread_environment() noexcept {
  g_environment_generation.fetch_add(1, std::memory_order_acq_rel);
}

void check_shape(const Shape& shape, int64_t itemsize, std::string_view op, std::string_view noun,
                 std::source_location where) {
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] < 0) {
      raise(ErrorKind::kInvalidArgument, op, where,
            fmt::format("shape {} has a negative extent {} in axis {}; every extent must be >= 0 "
                        "(0 makes an empty axis)",
                        shape.to_string(), shape[i], i));
    }
  }
  if (shape.rank() > kMaxRank) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("shape {} has rank {}, more than the {} axes Tessera supports (numpy's "
                      "limit); merge axes (jnp::reshape) or check how the shape was built",
                      shape.to_string(), shape.rank(), kMaxRank));
  }
  int64_t elements = 0;
  int64_t bytes = 0;
  if (!checked_product(shape.begin(), shape.end(), &elements) ||
      !checked_mul(elements, itemsize, &bytes)) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("shape {} holds more elements than {} can index: the product of its "
                      "extents times {} bytes an element does not fit a 64-bit count (at most {} "
                      "elements); check the extents (a wrapped or uninitialised size?)",
                      shape.to_string(), noun, itemsize,
                      std::numeric_limits<int64_t>::max() / itemsize));
  }
}

std::optional<int64_t> env_integer(const char* name, int64_t lo, int64_t hi, const char* meaning,
                                   const char* op, std::source_location where) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return std::nullopt;
  std::string why;
  int64_t value = 0;
  const bool starts_like_a_number =
      (*env >= '0' && *env <= '9') ||
      ((*env == '-' || *env == '+') && env[1] >= '0' && env[1] <= '9');
  if (!starts_like_a_number) {
    why = "not an integer";
  } else {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (errno == ERANGE) {
      why = "it does not fit a 64-bit integer";
    } else if (end == nullptr || *end != '\0') {
      why = fmt::format("'{}' follows the number", end == nullptr ? "" : end);
    } else if (v < 0 && lo >= 0) {
      why = "it is negative";
    } else if (v < lo || v > hi) {
      why = fmt::format("it is outside {}..{}", lo, hi);
    } else {
      value = static_cast<int64_t>(v);
    }
  }
  if (why.empty()) return value;
  raise(ErrorKind::kInvalidArgument, op, where,
        fmt::format("the environment variable {}='{}' is not {} ({}); set it to an integer from "
                    "{} to {}, or unset it",
                    name, env, meaning, why, lo, hi));
}

}  // namespace tessera::detail
