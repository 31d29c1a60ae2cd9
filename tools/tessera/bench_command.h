// `tessera bench <kernel>`: times a kernel against a reference in the same process.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::cli {
void register_bench_command(CLI::App& app);
}  // namespace tessera::cli
