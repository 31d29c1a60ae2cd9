// Internal: the SIMD target override. `TESSERA_SIMD_TARGET=AVX2` (any Highway target name:
// AVX3_SPR, AVX3_ZEN4, AVX3, AVX2, SSE4, ...) makes the native engine dispatch to that target
// or a lesser one even where the CPU has a better one, so that one machine can measure and test
// what a CPU without, e.g., AVX-512 would run.
#pragma once

namespace tessera::detail {

/// Applies TESSERA_SIMD_TARGET to Highway's supported targets, once per process (later calls do
/// nothing); an unset or empty variable changes nothing. A name this binary has no code for, or
/// that this CPU cannot run, is reported once on stderr and ignored. Call it before resolving a
/// dynamic dispatch.
void apply_simd_target_override() noexcept;

}  // namespace tessera::detail
