// ddp_train_main.cpp: the `ddp_train` entry point.
//
//   comm/mpi_environment.h    rank, world, local rank, host (a world of one without mpirun)
//   comm/mpi_communicator.h   FP16 gradient sums over MPI (CPU ranks)
//   launch/options.h          command line + INI config -> TrainConfig
//   launch/device_select.h    --device -> CpuBackend / CudaBackend (device = local rank)
//   trainer/data_source.h     --data -> train and test sets
//   trainer/trainer.h         the training loop (model, loss scaling, SGD, eval, checkpoints)
#include <cstdio>
#include <exception>
#include <memory>

#include "comm/communicator.h"
#include "comm/mpi_environment.h"
#include "kernels/error.h"
#include "launch/device_select.h"
#include "launch/options.h"
#include "trainer/trainer.h"
#if defined(DDP_HAVE_MPI)
#include "comm/mpi_communicator.h"
#endif

namespace {

std::unique_ptr<ddp::Communicator> make_communicator(const ddp::MpiEnvironment& env, ddp::DeviceKind device) {
  if (env.world_size() == 1) return std::make_unique<ddp::SingleProcessCommunicator>();
#if defined(DDP_HAVE_MPI)
  if (device == ddp::DeviceKind::Cpu) return std::make_unique<ddp::MpiCommunicator>();
#endif
  (void)device;
  throw ddp::Error("multi-rank training on GPUs needs the NCCL communicator, which this version does not have yet; "
                   "use --device cpu or one rank per job");
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<ddp::MpiEnvironment> env;
  try {
    env = std::make_unique<ddp::MpiEnvironment>(&argc, &argv);
    ddp::ParsedOptions opts = ddp::parse_options(argc, argv);
    if (opts.show_help) {
      if (env->rank() == 0) std::printf("%s", opts.help_text.c_str());
      return 0;
    }
    // Everything that can reject the input (flags, data, model shape,
    // checkpoint) runs before any output file is opened.
    ddp::TrainTestData data = ddp::load_train_test(opts.config.data, opts.config.seed);
    ddp::check_model_matches_data(opts.config, data);
    ddp::DeviceChoice device =
        ddp::select_device(opts.config.device, env->local_rank(), env->local_size(), opts.config.threads);
    std::unique_ptr<ddp::Communicator> comm = make_communicator(*env, device.backend->kind());
    if (env->rank() == 0) std::printf("%s\n", device.notice.c_str());
    ddp::Trainer trainer(opts.config, *device.backend, *comm, std::move(data));
    trainer.prepare();
    trainer.run();
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    const int rank = env ? env->rank() : 0;
    const std::string host = env ? env->host() : "?";
    std::fprintf(stderr, "ddp_train: error (rank %d on %s): %s\n", rank, host.c_str(), e.what());
    std::fflush(stderr);
    // A failing rank takes the whole job down: no peer is left in a collective.
    if (env && env->world_size() > 1) env->abort_job(1);
    return 1;
  }
}
