// Standalone program: the pipelined add (see pipelined_add.h and
// 02_pipelined_add_kernels.cc); prints "add: ok" when the results are right.
#include <iostream>

#include "pipelined_add.h"

int main() {
  try {
    const bool ok = tessera::examples::run_add(std::cout);
    std::cout << (ok ? "add: ok" : "add: FAILED") << "\n";
    return ok ? 0 : 1;
  } catch (const tessera::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
