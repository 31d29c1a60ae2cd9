// Internal to the `tessera` CLI: the subcommands main.cc registers on its CLI11 app.
//
//   CLI::App app{"tessera"};
//   register_info_command(app);   // `tessera info [--json] [--chip NAME] [--cores N]`
//   CLI11_PARSE(app, argc, argv);
//
// Each subcommand does its work in a CLI11 callback, so it runs inside `app.parse()`. Tessera
// errors (e.g. an unknown chip's UsageError) propagate out of `parse()` for main to print.
#pragma once

#include <CLI/CLI.hpp>

/// Adds `info`: this machine described as a chip (`pltpu::get_tpu_info()`), or with `--chip`
/// a TPU generation's per-TensorCore table (`pltpu::get_tpu_info_for_chip()`), as an aligned
/// table or, with `--json`, as one JSON object.
void register_info_command(CLI::App& app);
