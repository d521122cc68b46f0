// checkpoint_v1.cpp: checkpoint format version 1 (checkpoint_v1.h):
// encoding, and the validating read of a whole file or of its header.
#include "trainer/checkpoint/checkpoint_v1.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace ddp {

namespace {

constexpr size_t kFixedHeaderBytes = kCheckpointV1FixedHeaderBytes;
constexpr size_t kTrailerBytes = 12;  // total length, CRC
constexpr size_t kLengthFieldFromEnd = 12;
constexpr size_t kCrcFieldFromEnd = 4;
constexpr size_t kOptionalHeaderBytes = 24;  // run_id, train_samples, global_batch

// zlib's crc32 takes a 32-bit length; checkpoints of large models exceed it.
uint32_t crc32_of(const uint8_t* data, size_t byte_count) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (byte_count > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(byte_count, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    byte_count -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

// ---- encoding -------------------------------------------------------------------

void store_u32(uint8_t* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}
void store_u64(uint8_t* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t load_u32(const uint8_t* at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(at[i]) << (8 * i);
  return v;
}
uint64_t load_u64(const uint8_t* at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(at[i]) << (8 * i);
  return v;
}

class ByteWriter {
 public:
  explicit ByteWriter(size_t capacity_hint) { bytes_.reserve(capacity_hint); }

  void raw(const void* data, size_t byte_count) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + byte_count);
  }
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { store_u32(grow(4), v); }
  void u64(uint64_t v) { store_u64(grow(8), v); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void str(const std::string& s) {
    if (s.size() > std::numeric_limits<uint32_t>::max()) throw Error("checkpoint: string field longer than 4 GiB");
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void i64_vector(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) i64(x);
  }
  // Bulk path: the IEEE bits of each float, little-endian. On a little-endian
  // host that is the memory image, so a large model is one memcpy.
  void f32_vector(const std::vector<float>& v) {
    u64(v.size());
    uint8_t* at = grow(4 * v.size());
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (!v.empty()) std::memcpy(at, v.data(), 4 * v.size());
#else
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      store_u32(at + 4 * i, bits);
    }
#endif
  }

  size_t size() const { return bytes_.size(); }
  uint8_t* at(size_t offset) { return bytes_.data() + offset; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  uint8_t* grow(size_t byte_count) {
    bytes_.resize(bytes_.size() + byte_count);
    return bytes_.data() + bytes_.size() - byte_count;
  }
  std::vector<uint8_t> bytes_;
};

// ---- decoding -------------------------------------------------------------------

// Thrown by ByteReader when a field runs past its range; the caller knows
// whether that means "truncated" or "corrupt" and says so.
struct OutOfBytes {};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t byte_count) : data_(data), size_(byte_count) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return size_ - offset_; }

  const uint8_t* take(size_t byte_count) {
    if (byte_count > remaining()) throw OutOfBytes{};
    const uint8_t* p = data_ + offset_;
    offset_ += byte_count;
    return p;
  }
  uint8_t u8() { return *take(1); }
  uint32_t u32() { return load_u32(take(4)); }
  uint64_t u64() { return load_u64(take(8)); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() {
    const uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    const uint8_t* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  // Counts are checked against the bytes left before anything is allocated,
  // so garbage can never ask for an absurd allocation.
  std::vector<int64_t> i64_vector() {
    const uint64_t n = u64();
    if (n > remaining() / 8) throw OutOfBytes{};
    std::vector<int64_t> v(n);
    for (auto& x : v) x = i64();
    return v;
  }
  std::vector<float> f32_vector() {
    const uint64_t n = u64();
    if (n > remaining() / 4) throw OutOfBytes{};
    const uint8_t* p = take(4 * n);
    std::vector<float> v(n);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n > 0) std::memcpy(v.data(), p, 4 * n);
#else
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = load_u32(p + 4 * i);
      std::memcpy(&v[i], &bits, 4);
    }
#endif
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

// The header fields (without their length prefix), all of `h`. Inside the
// header a field that runs past its end is corruption: its extent is known.
TrainState decode_header(ByteReader& h, const std::string& name) {
  TrainState s;
  try {
    s.model_dims = h.i64_vector();
    s.activation = h.str();
    s.loss = h.str();
    const uint8_t momentum_flag = h.u8();
    if (momentum_flag > 1) {
      throw CheckpointError(name, "corrupt header: momentum flag is " + std::to_string(momentum_flag));
    }
    s.momentum_initialized = momentum_flag == 1;
    s.scaler.scale = h.f64();
    s.scaler.growth_tracker = h.i64();
    s.scaler.hysteresis_left = h.i64();
    s.step = h.i64();
    s.epoch = h.i64();
    s.epoch_sample_offset = h.i64();
    s.skipped_steps = h.i64();
    s.seed = h.u64();
    // The optional fields (checkpoint.h): all of them or none.
    if (h.remaining() >= kOptionalHeaderBytes) {
      s.run_id = h.u64();
      s.train_samples = h.u64();
      s.global_batch = h.i64();
    }
  } catch (const OutOfBytes&) {
    throw CheckpointError(name, "corrupt header: its fields run past its length of " +
                                    std::to_string(h.offset() + h.remaining()) + " bytes");
  }
  if (h.remaining() != 0) {
    throw CheckpointError(name, "corrupt header: " + std::to_string(h.offset() + h.remaining()) +
                                    " bytes long, its fields end after " + std::to_string(h.offset()));
  }
  // What v1 did not record because it had one model and one optimizer
  // (checkpoint_v1.h); every optimizer step that was not skipped was taken.
  s.format_version = 1;
  s.model_kind = "mlp";
  s.optimizer = "sgd";
  // Wrapping (unsigned) arithmetic: the fields may be anything here; the
  // validation that follows refuses a position whose difference wrapped.
  s.optimizer_steps = static_cast<int64_t>(static_cast<uint64_t>(s.step) - static_cast<uint64_t>(s.skipped_steps));
  return s;
}

// Everything between the fixed header and the trailer. `r` starts at the
// header-length field. OutOfBytes from `r` itself escapes (the caller decides
// between truncated and corrupt).
TrainState decode_fields(ByteReader& r, const std::string& name) {
  const uint32_t header_bytes = r.u32();
  ByteReader h(r.take(header_bytes), header_bytes);
  TrainState s = decode_header(h, name);
  s.master_weights_fp32 = r.f32_vector();
  s.momentum_fp32 = r.f32_vector();
  return s;
}

}  // namespace

std::vector<uint8_t> serialize_checkpoint_v1(const TrainState& s) {
  const size_t payload_bytes = 16 + 4 * (s.master_weights_fp32.size() + s.momentum_fp32.size());
  ByteWriter w(kFixedHeaderBytes + 256 + 8 * s.model_dims.size() + payload_bytes + kTrailerBytes);
  w.raw(kCheckpointV1Magic, sizeof(kCheckpointV1Magic));
  w.u32(kCheckpointV1FormatVersion);
  const size_t header_length_at = w.size();
  w.u32(0);  // header length, patched below

  const size_t header_start = w.size();
  w.i64_vector(s.model_dims);
  w.str(s.activation);
  w.str(s.loss);
  w.u8(s.momentum_initialized ? 1 : 0);
  w.f64(s.scaler.scale);
  w.i64(s.scaler.growth_tracker);
  w.i64(s.scaler.hysteresis_left);
  w.i64(s.step);
  w.i64(s.epoch);
  w.i64(s.epoch_sample_offset);
  w.i64(s.skipped_steps);
  w.u64(s.seed);
  w.u64(s.run_id);
  w.u64(s.train_samples);
  w.i64(s.global_batch);
  const size_t header_bytes = w.size() - header_start;
  if (header_bytes > std::numeric_limits<uint32_t>::max()) throw Error("checkpoint: header larger than 4 GiB");
  store_u32(w.at(header_length_at), static_cast<uint32_t>(header_bytes));

  w.f32_vector(s.master_weights_fp32);
  w.f32_vector(s.momentum_fp32);
  w.u64(w.size() + kTrailerBytes);
  w.u32(crc32_of(w.at(0), w.size()));
  return w.take();
}

TrainState parse_checkpoint_v1(const std::vector<uint8_t>& bytes, const std::string& name) {
  const size_t size = bytes.size();
  const uint8_t* data = bytes.data();
  auto fail = [&](const std::string& problem) { throw CheckpointError(name, problem); };

  // A file shorter than the magic but agreeing with it is a cut checkpoint.
  const size_t magic_bytes = std::min(size, sizeof(kCheckpointV1Magic));
  if (magic_bytes > 0 && std::memcmp(data, kCheckpointV1Magic, magic_bytes) != 0) {
    fail("not a ddp_train checkpoint (bad magic)");
  }
  if (size < kFixedHeaderBytes) fail(checkpoint_truncated_problem(size));
  const uint32_t version = load_u32(data + sizeof(kCheckpointV1Magic));
  if (version != kCheckpointV1FormatVersion) {
    fail("unsupported checkpoint format version " + std::to_string(version) + " (this build reads 1 and 2)");
  }

  const bool length_matches =
      size >= kFixedHeaderBytes + kTrailerBytes && load_u64(data + size - kLengthFieldFromEnd) == size;
  if (length_matches) {
    if (crc32_of(data, size - kCrcFieldFromEnd) != load_u32(data + size - kCrcFieldFromEnd)) {
      fail("checksum mismatch (file corrupt)");
    }
    // The checksum holds, so what follows can only fail for a file some other
    // writer produced; still checked, never trusted.
    ByteReader r(data, size - kTrailerBytes);
    r.take(kFixedHeaderBytes - 4);
    try {
      TrainState s = decode_fields(r, name);
      if (r.remaining() != 0) {
        fail("corrupt: " + std::to_string(r.remaining()) + " unexpected bytes after the momentum buffer");
      }
      return s;
    } catch (const OutOfBytes&) {
      fail("corrupt: fields run past the end of the file although the checksum holds");
    }
  }

  // The length field disagrees with the size. Walk the fields to tell a file
  // cut short (a crash, a full disk, a partial copy) from one damaged or
  // appended to.
  ByteReader r(data, size);
  r.take(kFixedHeaderBytes - 4);
  try {
    decode_fields(r, name);
  } catch (const OutOfBytes&) {
    fail(checkpoint_truncated_problem(size));
  }
  if (r.remaining() < kTrailerBytes) fail(checkpoint_truncated_problem(size));
  if (r.remaining() > kTrailerBytes) {
    fail(std::to_string(r.remaining() - kTrailerBytes) +
         " unexpected bytes after the end of the checkpoint (file corrupt or appended to)");
  }
  fail("checksum mismatch (file corrupt)");  // the length field itself is damaged
  return {};                                 // not reached
}

uint32_t checkpoint_v1_version(const uint8_t* fixed) { return load_u32(fixed + sizeof(kCheckpointV1Magic)); }
uint32_t checkpoint_v1_header_bytes(const uint8_t* fixed) { return load_u32(fixed + kFixedHeaderBytes - 4); }

TrainState decode_checkpoint_header_v1(const uint8_t* header, size_t header_bytes, const std::string& name) {
  ByteReader h(header, header_bytes);
  return decode_header(h, name);
}

}  // namespace ddp
