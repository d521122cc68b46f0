// run_outputs.cpp: the output checks of run_outputs.h.
#include "trainer/loop/run_outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "kernels/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/config/model_catalog.h"
#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/io/output_directory.h"
#include "trainer/io/output_registry.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

bool exists_on_disk(const std::string& path, struct stat& st) { return ::stat(path.c_str(), &st) == 0; }

// Same file or directory: device and inode (links, `./x` and `x` alike).
bool same_object(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

const char* kind_of(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISREG(st.st_mode)) return "a file";
  return "not a regular file";
}

// Throws when `output` (flag `flag`) is one of the run's inputs.
void refuse_if_input(const std::string& output, const char* flag, const std::vector<std::string>& inputs) {
  struct stat out {};
  if (!exists_on_disk(output, out)) return;  // inputs exist (they were read)
  for (const std::string& input : inputs) {
    struct stat in {};
    if (exists_on_disk(input, in) && same_object(out, in))
      throw Error(std::string(flag) + " " + output + " is also an input of this run (" + input +
                  "); refusing to write over it: choose another path");
  }
}

// A directory output: an existing path must be a directory.
void require_directory_or_absent(const std::string& dir, const char* flag) {
  struct stat st {};
  if (exists_on_disk(dir, st) && !S_ISDIR(st.st_mode))
    throw Error(std::string(flag) + " " + dir + ": exists and is " + kind_of(st) + ", not a directory");
}

// Creates `dir` (and parents) when missing, then proves it writable by
// creating and removing a file in it: permission bits alone do not tell a
// read-only mount or a full quota.
void make_writable_directory(const std::string& dir, const char* flag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(std::string(flag) + " " + dir + ": cannot create the directory: " + ec.message());
  const std::string probe = (fs::path(dir) / (".ddp_train-write-test." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw Error(std::string(flag) + " " + dir + ": cannot write there: " + std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

// A path as the file system will resolve it: links followed as far as it
// exists, the rest normalised. Outputs that do not exist yet compare so.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  fs::path r = fs::weakly_canonical(absolute, ec);
  if (ec) r = absolute.lexically_normal();
  if (!r.has_filename()) r = r.parent_path();  // "dir/" names dir
  return r;
}

// The run's outputs, each as it resolves, so that no output can land on
// another: a metrics file named like a checkpoint the run will write there,
// weights files, or a directory where the other writes a file.
struct OutputNames {
  fs::path metrics, checkpoint_dir, weights_dir;
  std::vector<fs::path> weights_files;
};

void refuse_overlaps(const TrainConfig& c, const OutputNames& o) {
  auto writes_checkpoint_file = [&](const fs::path& p) {
    return !c.checkpoint_dir.empty() && p.parent_path() == o.checkpoint_dir &&
           is_checkpoint_dir_file_name(p.filename().string());
  };
  auto is_weights_file = [&](const fs::path& p) {
    for (const fs::path& w : o.weights_files)
      if (p == w) return true;
    return false;
  };
  if (!c.metrics_path.empty()) {
    const std::string m = "--metrics " + c.metrics_path;
    if (!c.checkpoint_dir.empty() && o.metrics == o.checkpoint_dir)
      throw Error(m + ": is the --checkpoint-dir, a directory");
    if (!c.save_weights_dir.empty() && o.metrics == o.weights_dir) throw Error(m + ": is the --save-weights directory");
    if (writes_checkpoint_file(o.metrics))
      throw Error(m + ": a checkpoint file name in --checkpoint-dir, which this run writes: choose another name");
    if (is_weights_file(o.metrics)) throw Error(m + ": a file --save-weights writes: choose another name");
  }
  if (!c.save_weights_dir.empty()) {
    const bool one_file = is_safetensors_path(c.save_weights_dir);
    if (writes_checkpoint_file(one_file ? o.weights_files.front() : o.weights_dir))
      throw Error("--save-weights " + c.save_weights_dir + ": a checkpoint file name in --checkpoint-dir");
    if (!c.checkpoint_dir.empty() && is_weights_file(o.checkpoint_dir))
      throw Error("--checkpoint-dir " + c.checkpoint_dir + ": a file --save-weights writes");
  }
}

// Metrics: what may already be at the path (nothing is created here). A
// file this project wrote is replaced, or appended to by a resumed run;
// anyone else's only with --overwrite.
void check_metrics_path(const std::string& path, bool append, bool overwrite, std::vector<std::string>& notes) {
  struct stat st {};
  if (!exists_on_disk(path, st)) return;
  // A character device (/dev/null, /dev/stdout) takes lines and loses nothing.
  if (S_ISDIR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISBLK(st.st_mode))
    throw Error("--metrics " + path + ": is " + kind_of(st) + ", not a file");
  if (append) {
    if (!S_ISREG(st.st_mode) || st.st_size == 0 || owner_of(path)) return;
    if (overwrite) {
      notes.push_back("--metrics " + path + ": appending to it (--overwrite)");
      return;
    }
    throw Error(not_ours_text(path, "--metrics") +
                "; not appending to it: pass --overwrite to append anyway, or choose another path");
  }
  const std::string note = check_replaceable(path, "--metrics", overwrite);
  if (!note.empty()) notes.push_back(note + " (--resume appends)");
}

// Proves --metrics writable without creating it: an existing file is
// opened for appending (and closed); for a new one, its directory must take
// a new file (access: write and search, a read-only filesystem included).
void check_metrics_writable(const std::string& path) {
  struct stat st {};
  int err = 0;
  if (::lstat(path.c_str(), &st) == 0) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) err = errno;
    else ::close(fd);
  } else {
    const fs::path parent = fs::absolute(path).parent_path();
    if (::access(parent.c_str(), W_OK | X_OK) != 0) err = errno;
  }
  if (err != 0) throw Error("--metrics " + path + ": cannot open for writing: " + std::strerror(err));
}

// The files --save-weights DIR writes: one .npy per tensor, or a Hugging Face directory's two.
std::vector<std::string> weights_dir_files(const TrainConfig& c) {
  if (c.weights_format == "hf") return hf_gpt2_output_files(c.save_weights_dir);
  return weights_npy_paths(c.save_weights_dir, model_parameters(c));
}

// A file --save-weights replaces must be an earlier save's (or --overwrite).
// One line for them all: a GPT's directory holds a file per tensor.
void check_weights_files(const TrainConfig& c, const std::vector<std::string>& inputs,
                         std::vector<std::string>& notes) {
  int ours = 0, overwritten = 0;
  for (const std::string& file : weights_dir_files(c)) {
    refuse_if_input(file, "--save-weights", inputs);
    struct stat st {};
    if (!exists_on_disk(file, st)) continue;
    if (!S_ISREG(st.st_mode)) throw Error("--save-weights: " + file + " exists and is " + kind_of(st) + ", not a file");
    const std::string note = check_replaceable(file, "--save-weights", c.overwrite);
    if (note.find("(--overwrite)") != std::string::npos) ++overwritten;
    else if (!note.empty()) ++ours;
  }
  if (ours > 0)
    notes.push_back("weights: " + std::to_string(ours) + " file(s) of an earlier save in " + c.save_weights_dir +
                    " will be replaced at the end");
  if (overwritten > 0)
    notes.push_back("weights: " + std::to_string(overwritten) + " file(s) in " + c.save_weights_dir +
                    " that ddp_train did not write will be replaced at the end (--overwrite)");
}

// --save-weights PATH.safetensors: one file, replaced atomically at the end.
// What is there already must be an earlier save (a safetensors file), and
// the directory must exist (or be the --checkpoint-dir this run creates):
// one file is not worth creating directories for, and a typo in them
// should not pass.
void check_weights_safetensors_file(const std::string& file, const fs::path& checkpoint_dir, bool overwrite,
                                    std::vector<std::string>& notes) {
  struct stat st {};
  if (exists_on_disk(file, st)) {
    if (!S_ISREG(st.st_mode))
      throw Error("--save-weights " + file + ": exists and is " + kind_of(st) +
                  ", not a file (a .safetensors path writes one file)");
    const std::string note = check_replaceable(file, "--save-weights", overwrite);
    if (!note.empty()) notes.push_back(note + " at the end");
    return;
  }
  if (resolved(file).parent_path() != checkpoint_dir) require_output_directory(file, "--save-weights");
}

}  // namespace

std::vector<std::string> check_run_outputs(const TrainConfig& c, bool append_metrics, RunLock* checkpoint_dir_lock) {
  const std::vector<std::string> inputs = run_input_paths(c);
  std::vector<std::string> notes;
  // Every refusal first, then what creates anything: a refused run leaves
  // no directory or file behind.
  OutputNames names;
  if (!c.checkpoint_dir.empty()) {
    refuse_if_input(c.checkpoint_dir, "--checkpoint-dir", inputs);
    require_directory_or_absent(c.checkpoint_dir, "--checkpoint-dir");
    names.checkpoint_dir = resolved(c.checkpoint_dir);
  }
  const bool weights_one_file = is_safetensors_path(c.save_weights_dir);
  if (weights_one_file) {
    refuse_if_input(c.save_weights_dir, "--save-weights", inputs);
    check_weights_safetensors_file(c.save_weights_dir, names.checkpoint_dir, c.overwrite, notes);
    names.weights_files.push_back(resolved(c.save_weights_dir));
  } else if (!c.save_weights_dir.empty()) {
    refuse_if_input(c.save_weights_dir, "--save-weights", inputs);
    require_directory_or_absent(c.save_weights_dir, "--save-weights");
    check_weights_files(c, inputs, notes);
    names.weights_dir = resolved(c.save_weights_dir);
    for (const std::string& file : weights_dir_files(c)) names.weights_files.push_back(resolved(file));
  }
  if (!c.metrics_path.empty()) {
    refuse_if_input(c.metrics_path, "--metrics", inputs);
    check_metrics_path(c.metrics_path, append_metrics, c.overwrite, notes);
    names.metrics = resolved(c.metrics_path);
    const fs::path parent = names.metrics.parent_path();
    // The parent must be there already (or be an output directory this run creates).
    if (parent != names.checkpoint_dir && parent != names.weights_dir)
      require_output_directory(c.metrics_path, "--metrics");
  }
  refuse_overlaps(c, names);
  if (!c.checkpoint_dir.empty()) {
    make_writable_directory(c.checkpoint_dir, "--checkpoint-dir");
    if (checkpoint_dir_lock != nullptr) *checkpoint_dir_lock = RunLock(c.checkpoint_dir);
  }
  if (weights_one_file)  // its directory takes the temporary file and the rename
    make_writable_directory(resolved(c.save_weights_dir).parent_path().string(), "--save-weights");
  else if (!c.save_weights_dir.empty())
    make_writable_directory(c.save_weights_dir, "--save-weights");
  if (!c.metrics_path.empty()) check_metrics_writable(c.metrics_path);
  return notes;
}

void check_trace_file(const TrainConfig& c, const std::string& file) {
  const std::string t = "--trace " + c.trace_path + ": its file " + file;
  refuse_if_input(file, "--trace", run_input_paths(c));
  const fs::path r = resolved(file);
  if (!c.metrics_path.empty() && r == resolved(c.metrics_path)) throw Error(t + " is the --metrics file");
  if (!c.checkpoint_dir.empty() && r.parent_path() == resolved(c.checkpoint_dir) &&
      is_checkpoint_dir_file_name(r.filename().string()))
    throw Error(t + " is a checkpoint file name in --checkpoint-dir");
  if (!c.save_weights_dir.empty()) {
    std::vector<std::string> weights = {c.save_weights_dir};
    if (!is_safetensors_path(c.save_weights_dir)) weights = weights_npy_paths(c.save_weights_dir, model_parameters(c));
    for (const std::string& w : weights)
      if (r == resolved(w)) throw Error(t + " is a file --save-weights writes");
  }
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode)) throw Error(t + " is a symbolic link, which the trace would replace: choose another name");
  if (!S_ISREG(st.st_mode)) throw Error(t + " exists and is " + kind_of(st) + ", not a file");
  const std::string note = check_replaceable(file, "--trace", c.overwrite);
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
}

std::vector<std::string> check_checkpoint_dir_for_run(const std::string& dir, bool resumed, int64_t start_step,
                                                      int64_t last_step, uint64_t run_id) {
  std::vector<std::string> notes;
  struct stat st {};
  if (exists_on_disk(dir, st) && !S_ISDIR(st.st_mode))
    throw Error("--checkpoint-dir " + dir + ": exists and is " + kind_of(st) + ", not a directory");
  const auto checkpoints = list_checkpoints(dir);  // highest step first
  if (checkpoints.empty()) return notes;
  if (!resumed)
    throw Error("--checkpoint-dir " + dir + " already holds " + std::to_string(checkpoints.size()) +
                " checkpoint(s) of another run (newest " + checkpoints.front().second +
                "); --resume continues from it, or give an empty or new directory");
  int64_t own_later = 0, own_first = 0, own_last = 0;
  for (const auto& [step, path] : checkpoints) {
    if (step > last_step) continue;  // beyond this run's end: never written
    if (step <= start_step) break;
    std::string whose;
    try {
      const CheckpointHeader h = read_checkpoint_header(path);
      if (h.run_id != 0 && h.run_id == run_id && h.step == step) {
        own_first = step;
        own_last = own_later == 0 ? step : own_last;
        ++own_later;
        continue;
      }
      whose = h.step != step ? "a misnamed (its header says step " + std::to_string(h.step) + ")" : "another run's";
    } catch (const CheckpointError& e) {
      whose = "an unreadable (" + e.problem() + ")";
    }
    throw Error("--checkpoint-dir " + dir + " holds " + whose + " checkpoint " + path + " beyond the resumed step " +
                std::to_string(start_step) + ", which this run would overwrite: move it away or use another " +
                "--checkpoint-dir");
  }
  if (own_later > 0)
    notes.push_back("resume: " + dir + " holds " + std::to_string(own_later) + " later checkpoint(s) of this run " +
                    "(steps " + std::to_string(own_first) + " to " + std::to_string(own_last) +
                    "); each is replaced when this run reaches its step, and until then a bare --resume takes " +
                    "the highest step, theirs");
  return notes;
}

}  // namespace ddp
