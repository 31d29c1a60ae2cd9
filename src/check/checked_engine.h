// Internal: the checked engine (runtime/engine.h), made once per checked launch by the runtime
// when a kernel runs in interpret mode (pltpu::InterpretParams, TESSERA_INTERPRET or
// pltpu::ForceTpuInterpretMode). See docs/checked-mode.md for what it catches.
#pragma once

#include <memory>

#include "runtime/engine.h"
#include "tessera/interpret.h"

namespace tessera::detail {

/// The engine of one checked launch. Throws UsageError before any core runs when the launch
/// cannot run on the chip `params` names (its mesh or its scratch is too large).
std::unique_ptr<Engine> make_checked_engine(const LaunchSpec& spec,
                                            const pltpu::InterpretParams& params,
                                            const LaunchBuffer* buffers, int num_buffers,
                                            int64_t vmem_limit);

struct DeviceContext;
struct DeviceLaunch;

/// The engine of one device's part of a checked launch on a device mesh: its books (clocks,
/// arrays, copies, blocked cores) are those of the same launch on every device of the mesh,
/// made by the first device to enter it (src/check/checked_devices.cc).
std::unique_ptr<Engine> make_checked_device_engine(const LaunchSpec& spec,
                                                   const pltpu::InterpretParams& params,
                                                   int64_t vmem_limit, DeviceContext& device,
                                                   const DeviceLaunch& launch);
/// The same where each device keeps its own books (MPI ranks; src/check/checked_ranks.cc).
std::unique_ptr<Engine> make_checked_rank_engine(const LaunchSpec& spec,
                                                 const pltpu::InterpretParams& params,
                                                 int64_t vmem_limit, DeviceContext& device,
                                                 const DeviceLaunch& launch);

}  // namespace tessera::detail
