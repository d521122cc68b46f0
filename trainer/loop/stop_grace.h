// stop_grace.h: whether a stop by SIGTERM through mpirun has time for its
// checkpoint. Open MPI's mpirun, once it gets SIGTERM (a scheduler's stop),
// passes SIGTERM to the ranks odls_base_sigkill_timeout (T) seconds later
// and SIGKILL T seconds after that (measured with Open MPI 4.1, README
// "Stopping a run"): a stop checkpoint that takes longer than T is cut off.
// Nothing inside the ranks changes what mpirun does, so the run says so, once,
// when a checkpoint write shows it, and names the ways out: SIGUSR1 to mpirun
// (passed on at once, nothing killed) or a larger T.
#pragma once

#include <optional>
#include <string>

namespace ddp {

// T in seconds for the mpirun that started this process: --mca or
// OMPI_MCA_odls_base_sigkill_timeout (both reach the ranks' environment),
// else ~/.openmpi/mca-params.conf, else Debian's
// /etc/openmpi/openmpi-mca-params.conf, else Open MPI's default 1. nullopt
// when no mpirun started it (srun's direct launch, a single process).
std::optional<double> mpirun_sigterm_grace_s();

// The note to print when a checkpoint write of `write_s` seconds would not
// fit in `grace_s` (a stop also finishes its step first), else "".
std::string stop_grace_note(double write_s, std::optional<double> grace_s);

}  // namespace ddp
