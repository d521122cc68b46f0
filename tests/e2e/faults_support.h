// faults_support.h: what the fault suites (test_faults_*.cpp) share: the
// trainer's command line as one string (the CPU backend, one thread), and
// their fixture, a temporary directory per test. The mpiexec prefix of the
// multi-rank cases (which skip without MPI) is support/cli_test.h's.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/cli_test.h"

namespace ddp::test {

inline const std::string kTrainer = trainer_command();

class Faults : public CliTest {
 protected:
  Faults() : CliTest("faults") {}
};

}  // namespace ddp::test
