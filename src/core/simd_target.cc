// TESSERA_SIMD_TARGET: restricts Highway's dynamic dispatch to one target and the lesser ones.
#include "core/simd_target.h"

#include <hwy/targets.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::detail {

void apply_simd_target_override() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("TESSERA_SIMD_TARGET");
    if (env == nullptr || *env == '\0') return;
    // Highway numbers better targets with lower bits: the named target and every higher bit
    // (the lesser targets, which a dispatch falls back to) stay.
    const std::vector<int64_t> available = hwy::SupportedAndGeneratedTargets();
    std::string names;
    for (const int64_t bit : available) {
      if (std::strcmp(hwy::TargetName(bit), env) == 0) {
        hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(bit - 1));
        hwy::GetChosenTarget().Update(hwy::SupportedTargets());
        return;
      }
      names += names.empty() ? "" : ", ";
      names += hwy::TargetName(bit);
    }
    std::fprintf(stderr,
                 "tessera: TESSERA_SIMD_TARGET=%s is not a SIMD target this build and CPU can run "
                 "(%s); using the best one\n",
                 env, names.c_str());
  });
}

}  // namespace tessera::detail
