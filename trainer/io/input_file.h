// input_file.h: reading an input file (data set, checkpoint, config file)
// within bounds. Every reader comes through here, so the same rules hold for
// all of them:
//  - only a regular file is read. A FIFO, a device (/dev/zero), a socket or
//    a directory is refused by its type before it is read, and the open
//    itself cannot block (O_NONBLOCK), so a FIFO never hangs the job and an
//    endless device never fills memory;
//  - a file is read in one allocation of its size on disk (st_size), never
//    grown; a size above the caller's limit is refused before allocating;
//  - a file whose size changes while it is read is an error, not cut short
//    or extended: a CSV being appended to gives no half data set;
//  - running out of memory while reading is a one-line error naming the
//    file, never std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "trainer/io/data_error.h"

namespace ddp {

// The fixed cap on what one input file may hold, or make a reader allocate
// for it (stored, inflated, or converted to FP32): data sets are held in
// host memory whole on every rank, and 64 GiB is far above what this
// trainer loads (Fashion-MNIST: 47 MB) yet stops a wrong path before it can
// take a large node down.
constexpr size_t kInputFileCapBytes = size_t{64} << 30;

// The limit readers use by default: the smaller of kInputFileCapBytes and
// the machine's physical memory (a larger file could never be held anyway).
// Callers pass a smaller one where they know better (a config file: 1 MiB).
size_t input_limit_bytes();

// The machine's physical memory (sysconf), or kInputFileCapBytes when unknown.
size_t physical_memory_bytes();

// An input file refused or unreadable; what() is "<path>: <problem>".
// path() and problem() let a caller with its own error type (a checkpoint)
// rewrap it.
class InputFileError : public DataError {
 public:
  InputFileError(const std::string& path, const std::string& problem)
      : DataError(path, problem), path_(path), problem_(problem) {}
  const std::string& path() const { return path_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string path_, problem_;
};

// The bytes of the regular file `path`, exactly its st_size of them.
// `what` names the file's role in the size message ("data file", "config
// file"). InputFileError when it is missing or unreadable, not a regular
// file ("<path>: not a regular file (a FIFO)"), above `max_bytes`
// ("<path>: the config file is 3.0 MiB (3145728 bytes), above the 1.0 MiB
// (1048576 bytes) limit"), changes size while read, or memory runs out.
std::vector<uint8_t> read_input_file(const std::string& path, size_t max_bytes, const std::string& what);

// The first `max_bytes` bytes of `path` (fewer where it is shorter; none
// where it cannot be opened or read), to tell a file's kind by its magic or
// its header before anything else is done with it. O_NONBLOCK: a FIFO
// gives none instead of blocking the open.
std::vector<uint8_t> read_file_head(const std::string& path, size_t max_bytes);

// The same, as text (a config file; no check that it is UTF-8).
std::string read_text_file(const std::string& path, size_t max_bytes, const std::string& what);

// For a reader about to allocate what a header declares: InputFileError
// ("<path>: <what> needs 8.0 GiB (...), above the ... limit") when
// `bytes_needed` exceeds `max_bytes`.
void require_within_limit(const std::string& path, size_t bytes_needed, size_t max_bytes, const std::string& what);

// "1.5 GiB (1610612736 bytes)"; with the reason appended when `max_bytes`
// is input_limit_bytes(): "... limit (the machine's physical memory)".
std::string byte_size_text(size_t bytes);
std::string limit_text(size_t max_bytes);

// "<path>: out of memory while loading: <needed> needed": for a reader's
// std::bad_alloc, with what it was allocating when known.
InputFileError out_of_memory_error(const std::string& path, const std::string& needed = "");

// Runs `load` and turns a std::bad_alloc in it into out_of_memory_error.
template <typename Load>
auto naming_out_of_memory(const std::string& path, Load&& load) -> decltype(load()) {
  try {
    return load();
  } catch (const std::bad_alloc&) {
    throw out_of_memory_error(path);
  }
}

}  // namespace ddp
