// A CLI11 validator for the integer options of `tessera run`, `bench` and `info`: it says
// whether a value is not an integer or out of range, with the bounds, where CLI11's own
// CLI::Range says "not in range" for both. CLI11 prefixes the option's name ("--size: ...").
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tessera::cli {

inline CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        const char* s = value.c_str();
        const bool digits =
            (*s >= '0' && *s <= '9') || ((*s == '-' || *s == '+') && s[1] >= '0' && s[1] <= '9');
        char* end = nullptr;
        errno = 0;
        const long long v = digits ? std::strtoll(s, &end, 10) : 0;
        if (!digits || end == nullptr || *end != '\0') {
          return "'" + value + "' is not an integer; give a whole number from " + range;
        }
        if (errno == ERANGE || v < lo || v > hi) {
          return value + " is outside the allowed range; give a whole number from " + range;
        }
        return std::string();
      },
      "INT in " + std::to_string(lo) + ".." + std::to_string(hi));
}

}  // namespace tessera::cli
