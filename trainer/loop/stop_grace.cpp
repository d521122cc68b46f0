// stop_grace.cpp
#include "trainer/loop/stop_grace.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ddp {
namespace {

constexpr const char* kParameter = "odls_base_sigkill_timeout";

// The parameter's value in an Open MPI parameter file ("name = value"
// lines, '#' comments), if the file sets it.
std::optional<double> value_in_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::optional<double> value;
  while (std::getline(in, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    std::istringstream name_part(line.substr(0, equals));
    std::string name;
    name_part >> name;
    if (name != kParameter) continue;
    char* end = nullptr;
    const std::string text = line.substr(equals + 1);
    const double parsed = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && std::isfinite(parsed)) value = parsed;
  }
  return value;
}

}  // namespace

std::optional<double> mpirun_sigterm_grace_s() {
  // mpirun (the HNP) tells its ranks where it is; srun's direct launch does not.
  if (std::getenv("OMPI_MCA_orte_hnp_uri") == nullptr) return std::nullopt;
  if (const char* given = std::getenv("OMPI_MCA_odls_base_sigkill_timeout")) {
    char* end = nullptr;
    const double parsed = std::strtod(given, &end);
    if (end != given && std::isfinite(parsed)) return parsed;
  }
  if (const char* home = std::getenv("HOME")) {
    if (const std::optional<double> v = value_in_file(std::string(home) + "/.openmpi/mca-params.conf")) return v;
  }
  if (const std::optional<double> v = value_in_file("/etc/openmpi/openmpi-mca-params.conf")) return v;
  return 1.0;
}

std::string stop_grace_note(double write_s, std::optional<double> grace_s) {
  if (!grace_s || write_s <= *grace_s) return "";
  char line[512];
  std::snprintf(line, sizeof line,
                "note: this checkpoint took %.1f s, but a SIGTERM to mpirun (a scheduler's stop) gives the ranks "
                "%.0f s before SIGKILL (Open MPI's %s): stop this job with SIGUSR1 to mpirun, or start mpirun with "
                "--mca %s %.0f (README: Stopping a run)",
                write_s, *grace_s, kParameter, kParameter, std::ceil(2 * write_s + 10));
  return line;
}

}  // namespace ddp
