// faults_support.h: what the fault suites (test_faults_*.cpp) share: the
// trainer's command line (the CPU backend, one thread), the mpiexec prefix
// of the multi-rank cases (which skip without MPI), and a fixture with a
// temporary directory per test.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/test_support.h"

namespace ddp::test {

inline const std::string kTrainer = std::string(DDP_TRAIN_BINARY) + " --device cpu --threads 1";

#if defined(DDP_MPIEXEC)
// `env` first so the command can be exec'd (the child's pid is mpiexec's).
inline std::string mpiexec_prefix(int ranks) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 " +
         std::string(DDP_MPIEXEC) + " -n " + std::to_string(ranks) + " --oversubscribe ";
}
#endif

class Faults : public ::testing::Test {
 protected:
  void SetUp() override { dir = make_temp_dir("faults"); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string dir;
};

}  // namespace ddp::test
