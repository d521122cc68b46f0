// ddp_train_main.cpp: the `ddp_train` entry point.
//
//   launch/options.h        command line + INI config -> TrainConfig
//   launch/device_select.h  --device -> CpuBackend / CudaBackend
//   trainer/data_source.h   --data -> train and test sets
//   trainer/trainer.h       the training loop (model, loss scaling, SGD, eval, checkpoints)
//   comm/communicator.h     collectives (a world of one here)
#include <unistd.h>

#include <cstdio>
#include <exception>

#include "comm/communicator.h"
#include "launch/device_select.h"
#include "launch/options.h"
#include "trainer/trainer.h"

namespace {
std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    ddp::ParsedOptions opts = ddp::parse_options(argc, argv);
    if (opts.show_help) {
      std::printf("%s", opts.help_text.c_str());
      return 0;
    }
    ddp::SingleProcessCommunicator comm;
    // Everything that can reject the input (flags, data, model shape,
    // checkpoint) runs before any output file is opened.
    ddp::TrainTestData data = ddp::load_train_test(opts.config.data, opts.config.seed);
    ddp::check_model_matches_data(opts.config, data);
    ddp::DeviceChoice device = ddp::select_device(opts.config.device, 0, 1, opts.config.threads);
    std::printf("%s\n", device.notice.c_str());
    ddp::Trainer trainer(opts.config, *device.backend, comm, std::move(data));
    trainer.prepare();
    trainer.run();
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ddp_train: error (rank 0 on %s): %s\n", host_name().c_str(), e.what());
    return 1;
  }
}
