// test_stop_grace.cpp: the seconds a SIGTERM to mpirun leaves the ranks
// (stop_grace.h), from the environment mpirun gives them or Open MPI's
// parameter file, and the note when a checkpoint write does not fit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "support/temp_dir.h"
#include "trainer/loop/stop_grace.h"

namespace ddp {
namespace {

// Sets (or, with nullptr, unsets) variables for one test, then restores them.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    if (saved_.count(name) == 0) {
      const char* old = std::getenv(name);
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(StopGrace, OnlyUnderMpirunFromItsEnvironmentOrTheUsersParameterFile) {
  const test::TempDir home("stop-grace");
  ScopedEnv env;
  env.set("HOME", home.path().c_str());
  env.set("OMPI_MCA_odls_base_sigkill_timeout", nullptr);
  env.set("OMPI_MCA_orte_hnp_uri", nullptr);
  EXPECT_FALSE(mpirun_sigterm_grace_s().has_value()) << "no mpirun, no grace to speak of";
  env.set("OMPI_MCA_orte_hnp_uri", "1.0;tcp://127.0.0.1:1");
  const std::optional<double> fallback = mpirun_sigterm_grace_s();
  ASSERT_TRUE(fallback.has_value());
  EXPECT_GE(*fallback, 0.0);  // Open MPI's 1 s, unless /etc/openmpi sets it
  std::filesystem::create_directories(home.path() + "/.openmpi");
  std::ofstream(home.path() + "/.openmpi/mca-params.conf") << "# mine\nbtl = ^openib\nodls_base_sigkill_timeout = 25\n";
  EXPECT_EQ(mpirun_sigterm_grace_s(), 25.0);
  env.set("OMPI_MCA_odls_base_sigkill_timeout", "40");  // --mca or the environment wins
  EXPECT_EQ(mpirun_sigterm_grace_s(), 40.0);
}

TEST(StopGrace, ANoteOnlyWhenTheWriteDoesNotFit) {
  EXPECT_EQ(stop_grace_note(3.0, std::nullopt), "");
  EXPECT_EQ(stop_grace_note(0.5, 1.0), "");
  const std::string note = stop_grace_note(3.2, 1.0);
  EXPECT_NE(note.find("this checkpoint took 3.2 s"), std::string::npos) << note;
  EXPECT_NE(note.find("gives the ranks 1 s before SIGKILL"), std::string::npos) << note;
  EXPECT_NE(note.find("SIGUSR1"), std::string::npos) << note;
  EXPECT_NE(note.find("--mca odls_base_sigkill_timeout 17"), std::string::npos) << note;
}

}  // namespace
}  // namespace ddp
