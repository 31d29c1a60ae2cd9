// Standalone program: runs the quickstart kernels (see quickstart.h and
// 01_quickstart_kernels.cc) and prints "quickstart: ok" when both are right.
#include <iostream>

#include "quickstart.h"

int main() {
  try {
    const bool ok = tessera::examples::run_quickstart(std::cout);
    std::cout << (ok ? "quickstart: ok" : "quickstart: FAILED") << "\n";
    return ok ? 0 : 1;
  } catch (const tessera::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
