// fuzz_support.h: what the parser harnesses share. The contract they check:
// a parser given any bytes either returns or throws ddp::Error (DataError and
// CheckpointError are kinds of it). Every other outcome is a finding: a crash
// or sanitizer report (libFuzzer stops on its own), an allocation above
// -malloc_limit_mb, a hang past -timeout, and any other exception type, which
// expect_parser_error turns into an abort with the type and message printed.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>
#include <vector>

#include "kernels/error.h"
#include "trainer/io/data_file.h"

namespace ddp::fuzz {

using Bytes = std::vector<uint8_t>;

template <class Parse>
void expect_parser_error(Parse&& parse) {
  try {
    parse();
  } catch (const Error&) {
    // The expected way to refuse bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FINDING: parser threw %s (not ddp::Error): %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "FINDING: parser threw a non-std::exception\n");
    std::abort();
  }
}

// What read_data_file hands a parser: the bytes, gunzipped when they are
// gzip (gunzip_bytes may throw DataError, which the caller expects).
inline Bytes decoded(const Bytes& bytes, const std::string& name) {
  return is_gzip(bytes) ? gunzip_bytes(bytes, name) : bytes;
}

// Two-file loaders (images + labels, x + y) get one input cut at this marker;
// the seeds contain it and libFuzzer's memmem hook finds it from there.
constexpr char kSplitMarker[] = "#DDP-FUZZ-SPLIT#";

inline bool split_input(const uint8_t* data, size_t size, Bytes& first, Bytes& second) {
  const size_t marker_bytes = sizeof(kSplitMarker) - 1;
  const void* at = size >= marker_bytes ? memmem(data, size, kSplitMarker, marker_bytes) : nullptr;
  if (!at) return false;
  const size_t cut = static_cast<size_t>(static_cast<const uint8_t*>(at) - data);
  first.assign(data, data + cut);
  second.assign(data + cut + marker_bytes, data + size);
  return true;
}

// A file a path-only API can open, rewritten in place for every input: an
// in-memory file (memfd) opened through /proc/self/fd, so a run costs no disk
// I/O and leaves nothing behind.
class MemFile {
 public:
  explicit MemFile(const char* tag) : fd_(memfd_create(tag, 0)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }

  void write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  void write(const Bytes& bytes) { write(bytes.data(), bytes.size()); }

 private:
  int fd_;
  std::string path_;
};

}  // namespace ddp::fuzz
