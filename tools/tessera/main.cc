// The `tessera` command line: `tessera info`, `tessera run <example>`.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string_view>

#include "bench_command.h"
#include "commands.h"
#include "run_command.h"
#include "tessera/error.h"

int main(int argc, char** argv) {
  // The benchmarks' OpenBLAS reference at its best kernels for this CPU (bench_matmul.cc): only
  // for the benchmarks that have one, so that the others start no second process.
  if (argc > 1 && std::string_view(argv[1]) == "bench") {
    for (int i = 2; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "matmul" || a == "suite") {
        tessera::cli::rerun_with_openblas_kernels(argv);
        break;
      }
    }
  }
  CLI::App app{"Tessera: the Pallas TPU kernel model in C++, on CPUs."};
  app.require_subcommand(1);
  register_info_command(app);
  tessera::cli::register_run_command(app);
  tessera::cli::register_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
