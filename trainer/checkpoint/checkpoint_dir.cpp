// checkpoint_dir.cpp: the checkpoint directory of checkpoint_dir.h.
#include "trainer/checkpoint/checkpoint_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "trainer/io/atomic_file.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_validation.h"

namespace ddp {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// ---- directory ------------------------------------------------------------------

constexpr const char* kNamePrefix = "ckpt-step";
// What this build writes (format 2, a safetensors file), and what earlier
// builds wrote (format 1): a directory of either still resumes.
constexpr const char* kNameSuffix = ".safetensors";
constexpr const char* kV1NameSuffix = ".ddpckpt";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The name of the checkpoint of `step` with that suffix.
std::string file_name_with(int64_t step, const char* suffix) {
  std::string digits = std::to_string(step);
  if (digits.size() < 12) digits.insert(0, 12 - digits.size(), '0');
  return kNamePrefix + digits + suffix;
}

// The step of `name` if it is exactly the checkpoint name of a step with
// that suffix, else -1.
int64_t step_of_file_name_with(const std::string& name, const char* suffix_text) {
  const std::string prefix = kNamePrefix;
  const std::string suffix = suffix_text;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      !ends_with(name, suffix)) {
    return -1;
  }
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size() - suffix.size();
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return -1;
  int64_t step = -1;
  const auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last) return -1;
  return file_name_with(step, suffix_text) == name ? step : -1;
}

// The step of a checkpoint file name, or -1 if `name` is not exactly what
// checkpoint_file_name writes, or an earlier build wrote (so
// "ckpt-step1.safetensors" or a copy named "....safetensors.bak" is never
// taken for a checkpoint).
int64_t step_of_file_name(const std::string& name) {
  for (const char* suffix : {kNameSuffix, kV1NameSuffix}) {
    const int64_t step = step_of_file_name_with(name, suffix);
    if (step >= 0) return step;
  }
  return -1;
}

// "<checkpoint name>.tmp.<pid>", what an interrupted write leaves behind.
bool is_temp_file_name(const std::string& name) {
  const size_t marker = name.rfind(kTempFileMarker);
  if (marker == std::string::npos) return false;
  const std::string pid = name.substr(marker + std::strlen(kTempFileMarker));
  return !pid.empty() && std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         step_of_file_name(name.substr(0, marker)) >= 0;
}

struct DirListing {
  std::vector<std::pair<int64_t, std::string>> checkpoints;  // (step, path), highest step first
  std::vector<std::string> temp_files;                       // sorted by path
};

DirListing list_checkpoint_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  DirListing listing;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (ec) throw Error("cannot list checkpoint directory " + dir + ": " + ec.message());
    return listing;  // first run: nothing written yet
  }
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error("cannot list checkpoint directory " + dir + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = step_of_file_name(name);
    if (step >= 0) {
      listing.checkpoints.emplace_back(step, it->path().string());
    } else if (is_temp_file_name(name)) {
      listing.temp_files.push_back(it->path().string());
    }
  }
  if (ec) throw Error("cannot list checkpoint directory " + dir + ": " + ec.message());
  std::sort(listing.checkpoints.begin(), listing.checkpoints.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::sort(listing.temp_files.begin(), listing.temp_files.end());
  return listing;
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  if (step < 0) throw Error("checkpoint_file_name: negative step " + std::to_string(step));
  return file_name_with(step, kNameSuffix);
}

CheckpointScan find_newest_valid_checkpoint(const std::string& dir) {
  const DirListing listing = list_checkpoint_dir(dir);
  CheckpointScan scan;
  scan.candidates = listing.checkpoints.size();
  for (const std::string& temp : listing.temp_files) {
    scan.skipped.emplace_back(temp, "incomplete write (leftover temporary file, not deleted)");
  }
  for (const auto& [step, path] : listing.checkpoints) {
    try {
      validate_checkpoint_contents(read_checkpoint(path), path);
      scan.newest_valid = path;
      break;
    } catch (const CheckpointError& e) {
      scan.skipped.emplace_back(path, e.problem());
    }
  }
  return scan;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  return list_checkpoint_dir(dir).checkpoints;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep, uint64_t run_id,
                                           const std::vector<int64_t>& model_dims, const std::string& just_written) {
  std::vector<std::string> removed;
  if (keep <= 0 || run_id == 0) return removed;
  namespace fs = std::filesystem;
  std::error_code ec;
  // A run resumed from an earlier checkpoint writes below the lineage's
  // newest: the files above the one just written belong to the branch it
  // left, are not older than it, and are neither counted nor deleted.
  int64_t written_step = -1;
  if (!just_written.empty()) {
    try {
      written_step = read_checkpoint_header(just_written).step;
    } catch (const CheckpointError&) {
    }
  }
  int kept = 0;
  for (const auto& [step, path] : list_checkpoint_dir(dir).checkpoints) {  // highest step first
    if (written_step >= 0 && step > written_step) continue;
    CheckpointHeader header;
    try {
      header = read_checkpoint_header(path);
    } catch (const CheckpointError&) {
      continue;  // not provably this run's: never deleted
    }
    if (header.run_id != run_id || header.model_dims != model_dims || header.step != step) continue;
    const bool is_just_written = !just_written.empty() && fs::equivalent(path, just_written, ec);
    if (kept < keep || is_just_written) {
      ++kept;
      continue;
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      const int err = errno;
      throw Error("cannot remove old checkpoint " + path + ": " + errno_text(err));
    }
    removed.push_back(path);
  }
  return removed;
}

bool is_checkpoint_dir_file_name(const std::string& name) {
  return step_of_file_name(name) >= 0 || is_temp_file_name(name);
}

}  // namespace ddp
