// File: tessera/tessera.h
//
// The umbrella header: everything a kernel author names. `using namespace
// tessera;` then brings in `pl`, `pltpu`, `jnp` and `lax`, mirroring the
// Python imports of a Pallas kernel:
//
//   #include <tessera/tessera.h>
//   using namespace tessera;
//
//   auto fill_42 = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core"),
//                             pl::scratch_types(pltpu::VMEM<float>({128})))(
//       [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
//         o_vmem = jnp::full_like(o_vmem, 42.0f);  // compute in VMEM
//         pltpu::sync_copy(o_vmem, o_ref);         // VMEM -> HBM
//       });
#pragma once

#include "tessera/array.h"
#include "tessera/block_spec.h"
#include "tessera/buffered_ref.h"
#include "tessera/compiler_params.h"
#include "tessera/control.h"
#include "tessera/device.h"
#include "tessera/dma.h"
#include "tessera/dot.h"
#include "tessera/dtype.h"
#include "tessera/error.h"
#include "tessera/gather.h"
#include "tessera/index_math.h"
#include "tessera/interpret.h"
#include "tessera/kernel.h"
#include "tessera/memory_space.h"
#include "tessera/mesh.h"
#include "tessera/packed_ref.h"
#include "tessera/pallas_call.h"
#include "tessera/pipeline.h"
#include "tessera/ref.h"
#include "tessera/remote_dma.h"
#include "tessera/resident.h"
#include "tessera/run_scoped.h"
#include "tessera/scratch.h"
#include "tessera/semaphore.h"
#include "tessera/shape.h"
#include "tessera/slice.h"
#include "tessera/tpu_info.h"
#include "tessera/trace.h"
#include "tessera/value.h"
#include "tessera/vector_create.h"
#include "tessera/vector_extra.h"
#include "tessera/vector_math.h"
#include "tessera/vector_ops.h"
#include "tessera/vector_reduce.h"
#include "tessera/vector_shape.h"
