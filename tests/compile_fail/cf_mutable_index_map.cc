// An index map may not be a mutable lambda: every core evaluates it at once.
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  int calls = 0;
  const pl::BlockSpec spec({8, 128}, [calls](int i) mutable {
    ++calls;
    return pl::idx(i, 0);
  });
  (void)spec;
}
