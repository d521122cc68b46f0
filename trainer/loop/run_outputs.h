// run_outputs.h: every file a run writes (metrics, checkpoints, saved
// weights) checked and made ready before the first step, so that a run never
// trains for hours and then fails to save, and never writes over anything
// the user had: a data file, a config, a checkpoint it reads, a file that is
// not ours, or another run's checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/checkpoint/run_lock.h"
#include "trainer/config/run_inputs.h"
#include "trainer/config/train_config.h"

namespace ddp {

// What rank 0 checks and creates before training. An existing output file
// is replaced only when ddp_train wrote it (output_registry.h), or with
// --overwrite; a resumed run appends only to a --metrics file it wrote.
// Throws ddp::Error with one line naming the flag and the path when:
//  - an output path is also one of the run's inputs (the same file or
//    directory, through any link);
//  - --metrics names a directory or a FIFO, or an existing file that may
//    not be replaced (or appended to) as above;
//  - --checkpoint-dir or --save-weights exists and is not a directory, or
//    cannot be created or written (a file is created there and removed);
//  - a --save-weights file it would replace is not a file, or may not be
//    replaced as above;
//  - --save-weights PATH.safetensors (one file) exists and is not a file
//    or may not be replaced, or its directory does not exist or cannot be
//    written.
// Creates --checkpoint-dir and --save-weights when missing. With a
// `checkpoint_dir_lock`, takes it on --checkpoint-dir (run_lock.h) right
// after the directory is there and before anything else is created, so a
// second run into it refuses with nothing of its own left behind. The
// --metrics file is not created here (its directory is checked writable):
// MetricsFile creates it, and so knows it may remove it if its first write
// fails. Returns the lines to print about what will happen (files replaced).
std::vector<std::string> check_run_outputs(const TrainConfig& config, bool append_metrics,
                                           RunLock* checkpoint_dir_lock = nullptr);

// A rank's --trace file (`file`: step_trace.h's name for the rank), checked
// by every rank before training. Throws ddp::Error naming it when it is one
// of the run's inputs (through any link), the --metrics file, a checkpoint
// name in --checkpoint-dir or a file --save-weights writes, or exists and
// is a link, a directory, or a file it may not replace (output_registry.h:
// one ddp_train wrote is replaced, saying so on stderr; anyone else's only
// with --overwrite).
void check_trace_file(const TrainConfig& config, const std::string& file);

// The checkpoint directory as this run will use it. A fresh run (start_step
// 0, not resumed) refuses a directory that already holds checkpoints; a
// resumed run refuses one that holds another run's checkpoint (or one whose
// header cannot be read) at a step it may write, in (start_step, last_step]
// (a stop signal can write at any of them), which it would overwrite.
// Later checkpoints of its own lineage are replaced as it reaches their
// steps: returns a line saying so. Throws ddp::Error naming the directory.
std::vector<std::string> check_checkpoint_dir_for_run(const std::string& dir, bool resumed, int64_t start_step,
                                                      int64_t last_step, uint64_t run_id);

}  // namespace ddp
