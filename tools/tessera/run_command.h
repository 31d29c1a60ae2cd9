// `tessera run <example>`: runs one of the example kernels and verifies it.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::cli {
void register_run_command(CLI::App& app);
}  // namespace tessera::cli
