// checkpoint.cpp: which format a checkpoint file is in, its validating read
// (whole or header only), and the atomic write (atomic_file.h).
#include "trainer/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "trainer/io/atomic_file.h"
#include "trainer/checkpoint/checkpoint_v1.h"
#include "trainer/checkpoint/checkpoint_v2.h"
#include "trainer/io/input_file.h"

namespace ddp {

namespace {

// Messages quote names from the disk; control characters in them must not
// break the one-line promise (as DataError does).
std::string one_line(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

// A v1 file starts with its magic; anything else is read as v2 (a
// safetensors file starts with its header size, whose high bytes are zero,
// never "DDPCKPT1"). A file shorter than the magic but agreeing with it is a
// cut v1 checkpoint; an empty file is read as v1 (both say "truncated").
bool is_v1(const uint8_t* data, size_t size) {
  const size_t n = std::min(size, sizeof(kCheckpointV1Magic));
  return n == 0 ||
         std::memcmp(data, kCheckpointV1Magic, n) == 0;  // memcmp may not see a null pointer, even for 0 bytes
}

// Through input_file.h, like every input: regular files only (a FIFO given
// to --resume is refused, not waited on), at most the input limit, read in
// one allocation of the size on disk.
std::vector<uint8_t> read_whole_file(const std::string& path) {
  try {
    return read_input_file(path, input_limit_bytes(), "checkpoint");
  } catch (const InputFileError& e) {
    throw CheckpointError(path, e.problem());
  }
}

// Reads [offset, offset + byte_count) of an open file; "truncated" when the
// file ends first.
std::vector<uint8_t> read_range(int fd, size_t offset, size_t byte_count, const std::string& path) {
  std::vector<uint8_t> bytes(byte_count);
  size_t got = 0;
  while (got < byte_count) {
    const ssize_t n = ::pread(fd, bytes.data() + got, byte_count - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw CheckpointError(path, checkpoint_truncated_problem(offset + got));
    got += static_cast<size_t>(n);
  }
  return bytes;
}

CheckpointHeader header_of(const TrainState& s) {
  CheckpointHeader out;
  out.model_kind = s.model_kind;
  out.model_dims = s.model_dims;
  out.step = s.step;
  out.run_id = s.run_id;
  return out;
}

CheckpointHeader read_header_v1(int fd, const std::string& path) {
  const std::vector<uint8_t> fixed = read_range(fd, 0, kCheckpointV1FixedHeaderBytes, path);
  if (!is_v1(fixed.data(), fixed.size())) throw CheckpointError(path, "not a ddp_train checkpoint (bad magic)");
  const uint32_t version = checkpoint_v1_version(fixed.data());
  if (version != kCheckpointV1FormatVersion)
    throw CheckpointError(path, "unsupported checkpoint format version " + std::to_string(version));
  const uint32_t header_bytes = checkpoint_v1_header_bytes(fixed.data());
  if (header_bytes > kCheckpointV1MaxHeaderBytes)
    throw CheckpointError(path, "corrupt header: length " + std::to_string(header_bytes));
  const std::vector<uint8_t> header = read_range(fd, fixed.size(), header_bytes, path);
  return header_of(decode_checkpoint_header_v1(header.data(), header.size(), path));
}

CheckpointHeader read_header_v2(int fd, const std::string& path) {
  std::vector<uint8_t> head = read_range(fd, 0, 8, path);
  const size_t header_bytes = checkpoint_v2_header_bytes(head.data(), path);
  const std::vector<uint8_t> header = read_range(fd, 8, header_bytes, path);
  head.insert(head.end(), header.begin(), header.end());
  return header_of(decode_checkpoint_header_v2(head, path));
}

}  // namespace

CheckpointError::CheckpointError(const std::string& file, const std::string& problem)
    : Error(one_line("checkpoint " + file + ": " + problem)), file_(file), problem_(one_line(problem)) {}

std::string checkpoint_truncated_problem(size_t file_bytes) {
  return "truncated (file ends after " + std::to_string(file_bytes) + " bytes)";
}

std::vector<uint8_t> serialize_checkpoint(const TrainState& s) { return serialize_checkpoint_v2(s); }

TrainState parse_checkpoint(std::vector<uint8_t> bytes, const std::string& name) {
  if (is_v1(bytes.data(), bytes.size())) return parse_checkpoint_v1(bytes, name);
  return parse_checkpoint_v2(std::move(bytes), name);
}

TrainState read_checkpoint(const std::string& path) { return parse_checkpoint(read_whole_file(path), path); }

void write_checkpoint_atomic(const std::string& path, const TrainState& s, const MidWriteHook& mid_write) {
  write_file_atomic(path, serialize_checkpoint(s), "checkpoint", mid_write);
}

CheckpointHeader read_checkpoint_header(const std::string& path) {
  // O_NONBLOCK: a FIFO named like a checkpoint must not hang a directory scan.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    throw CheckpointError(path, std::string("cannot open: ") + std::strerror(err));
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw CheckpointError(path, "not a regular file");
  uint8_t first[8] = {};
  const size_t got = static_cast<size_t>(std::max<ssize_t>(0, ::pread(fd, first, sizeof first, 0)));
  return is_v1(first, got) ? read_header_v1(fd, path) : read_header_v2(fd, path);
}

}  // namespace ddp
