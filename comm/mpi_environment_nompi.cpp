// mpi_environment_nompi.cpp: DDP_MPI=OFF, always a world of one.
#include <unistd.h>

#include <cstdlib>

#include "comm/mpi_environment.h"

namespace ddp {

MpiEnvironment::MpiEnvironment(int*, char***) {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  host_ = name;
}

MpiEnvironment::~MpiEnvironment() = default;

bool MpiEnvironment::has_mpi() const { return false; }

std::vector<uint64_t> MpiEnvironment::allgather_words(const std::vector<uint64_t>& words, double) const {
  return words;
}

void MpiEnvironment::abort_job(int exit_code) const { std::_Exit(exit_code); }

}  // namespace ddp
