// TESSERA_HOST_REFERENCE marks a test's own reference loop, run on the test's thread alone before
// or after the kernel it checks: the sanitizers leave it uninstrumented (ASan and TSan check the
// library's code, and the kernels' threads never touch the reference's memory). The ports of
// Pallas' kernels check against references of 10^8 multiply-adds, which cost seconds a test under
// TSan when every load and store is instrumented (docs/building.md). The marked function should
// walk raw pointers in its inner loops: GCC does not inline an instrumented function, such as
// std::vector::operator[], into an uninstrumented one.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TESSERA_HOST_REFERENCE __attribute__((no_sanitize("address", "thread")))
#else
#define TESSERA_HOST_REFERENCE
#endif
