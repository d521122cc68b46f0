// run_settings.h: a rank's effective configuration as the start-up
// agreement compares it (trainer/config/rank_agreement.h): every flag that
// parse_options knows, by the value it took (given or defaulted), except
// those that may differ between ranks by design; input files by what they
// hold instead of their paths (two nodes may keep one data set at two
// paths, or two data sets at one path); and what each rank resolves for
// itself.
#pragma once

#include <string>
#include <vector>

#include "launch/cli/options.h"
#include "trainer/config/rank_agreement.h"

namespace ddp {

// The flags read by each rank alone, never compared: --threads (a node's
// cores), --config (its values are compared, not its path), --help.
bool is_rank_local_flag(const std::string& flag);

// The flags that name an input file or directory: compared by
// file_identity, not by path.
bool is_input_path_flag(const std::string& flag);

// opts.flag_values with the input paths replaced by their identities, the
// values parse_options resolved from contradicting sources, and the device
// kind --device resolves to on this rank. Reads the input files (see
// file_identity.h for how much): call it only where there are peers.
std::vector<Setting> run_settings(const ParsedOptions& opts);

}  // namespace ddp
