// The expectations of the programs ctest runs under mpirun (tests/mpi): each prints "WRONG" for
// every unmet one, on the rank that found it (and with MPI_EXPECT_VERBOSE set, every error it
// expected).
#pragma once

#include <tessera/tessera.h>

#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <string>
#include <vector>

namespace mpi_expect {

inline int g_wrong = 0;
inline std::string g_only;  // argv[1]: run only the cases whose name contains one of its ','-parts

inline bool wanted(const std::string& name) {
  size_t at = 0;
  for (;;) {
    const size_t end = g_only.find(',', at);
    const std::string part = g_only.substr(at, end == std::string::npos ? end : end - at);
    if (name.find(part) != std::string::npos) return true;
    if (end == std::string::npos) return false;
    at = end + 1;
  }
}

inline void wrong(const std::string& what) {
  ++g_wrong;
  std::cout << "rank " << tessera::jax::process_index() << ": WRONG " << what << std::endl;
}

// Runs `program` once as a program on the 1-D mesh "x" of every rank.
inline void run_program(const std::function<void()>& program) {
  using namespace tessera;
  const int n = jax::device_count();
  jax::shard_map(program, jax::make_mesh({n}, {"x"}), PartitionSpecs(std::vector<PartitionSpec>{}),
                 PartitionSpecs(std::vector<PartitionSpec>{}))();
}

// Runs `kernel` once on every device of the 1-D mesh of every rank.
template <class K>
void run(const K& kernel) {
  run_program([&] { (void)kernel(); });
}

// Expects `f` to raise a tessera::Error of `kind` whose message contains every one of `says`.
inline void expect_error(const std::string& name, const std::function<void()>& f,
                         tessera::ErrorKind kind, std::initializer_list<std::string> says) {
  if (!wanted(name)) return;
  try {
    f();
    wrong(name + ": no error");
  } catch (const tessera::Error& e) {
    if (std::getenv("MPI_EXPECT_VERBOSE") != nullptr) {
      std::cout << "rank " << tessera::jax::process_index() << ": " << name << ": " << e.what()
                << std::endl;
    }
    if (e.kind() != kind) {
      wrong(name + ": kind " + to_string(e.kind()) + ": " + e.what());
      return;
    }
    for (const std::string& s : says) {
      if (std::string(e.what()).find(s) == std::string::npos) {
        wrong(name + ": message lacks \"" + s + "\": " + e.what());
        break;
      }
    }
  }
}

inline void expect_clean(const std::string& name, const std::function<void()>& f) {
  if (!wanted(name)) return;
  try {
    f();
  } catch (const std::exception& e) {
    wrong(name + ": " + e.what());
  }
}

}  // namespace mpi_expect
