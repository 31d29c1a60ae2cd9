#include "usage_error.h"

namespace tessera::examples {

void usage_error(const char* name, const std::string& what, const std::string& hint,
                 std::source_location where) {
  const std::string file = where.file_name();
  throw UsageError(ErrorKind::kInvalidArgument,
                   std::string("tessera: ") + name + " at " +
                       file.substr(file.find_last_of('/') + 1) + ":" +
                       std::to_string(where.line()) + ": " + what + "; hint: " + hint,
                   where, -1, {}, name);
}

}  // namespace tessera::examples
