// Internal: running a pipeline whose specification was already validated (a pallas_call maps its
// grid once, before launch, and every core runs its share of it).
#pragma once

#include "runtime/block_mapping.h"
#include "tessera/pipeline.h"

namespace tessera::detail {

/// Runs the grid walk `g` on the calling core (inside a kernel body), as run_pipeline does after
/// mapping its operands.
void run_mapped_pipeline(const PipelineConfig& config, const GridMapping& g,
                         FunctionRef<void(const WindowRef*)> body);

}  // namespace tessera::detail
