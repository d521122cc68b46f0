// cli_test.h: what the suites that run build/ddp_train as a user does
// (tests/e2e/) share: the trainer's command line, a run of it with its
// output captured, the mpiexec prefix of the multi-rank cases, and the
// CliTest fixture, a temporary directory per test that is removed even when
// an ASSERT ends the test early. Only the e2e binary defines
// DDP_TRAIN_BINARY, so a unit test that includes this does not build.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "support/test_support.h"

namespace ddp::test {

// ddp_train on the CPU backend with one thread, so a test's figures do not
// depend on the host's cores.
inline std::string trainer_command() { return std::string(DDP_TRAIN_BINARY) + " --device cpu --threads 1"; }

// A run of the trainer with `args`, stdout and stderr together. Under
// `timeout`: a run that hangs ends with 124 and fails its own test, instead
// of the whole binary running into CTest's timeout.
inline CommandResult run_trainer(const std::string& args, int timeout_s = 120) {
  return run_command("timeout -k 2 " + std::to_string(timeout_s) + " " + trainer_command() + " " + args + " 2>&1");
}

#if defined(DDP_MPIEXEC)
// Open MPI as root (containers, CI), one OpenBLAS thread per rank, more
// ranks than cores. `env` first so the command can be exec'd (the child's
// pid is mpiexec's).
inline std::string mpiexec_prefix(int ranks) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 " +
         std::string(DDP_MPIEXEC) + " -n " + std::to_string(ranks) + " --oversubscribe ";
}
#endif

// The number at `key` in a JSON line (--bench's record, a metrics
// record), -1 where the key is absent.
inline double json_value(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? -1.0 : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

// The fixture of a suite of trainer runs: `dir` is this test's own
// directory. A suite derives from it and names its directories by `tag`.
class CliTest : public ::testing::Test {
 protected:
  explicit CliTest(const std::string& tag) : temp_dir_(tag), dir(temp_dir_.path()) {}

  CommandResult run(const std::string& args, int timeout_s = 60) const { return run_trainer(args, timeout_s); }

  // A refusal before training: exit 1, exactly one error line holding every
  // word, no step trained, and no source-file place in the line.
  void expect_refused_before_training(const std::string& args, std::initializer_list<std::string> words) const {
    const CommandResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    const std::string found = single_error_line(r.output);
    EXPECT_FALSE(found.empty()) << args << ": not exactly one error line in\n" << r.output;
    for (const std::string& w : words) EXPECT_NE(found.find(w), std::string::npos) << "'" << w << "' not in: " << found;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << "trained before refusing: " << r.output;
    EXPECT_EQ(r.output.find(".cpp:"), std::string::npos) << "source path in: " << found;
  }

 private:
  TempDir temp_dir_;  // declared before `dir`, which is initialised from it

 protected:
  const std::string dir;
};

// Every "loss" and "test_loss" of a metrics file, in order.
inline std::vector<double> metrics_losses(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line))
    for (const char* key : {"\"loss\":", "\"test_loss\":"}) {
      const size_t at = line.find(key);
      if (at != std::string::npos) losses.push_back(std::stod(line.substr(at + std::string(key).size())));
    }
  return losses;
}

}  // namespace ddp::test
