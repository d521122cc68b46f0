// buffer.h: RAII memory of `count` elements of T on one Backend.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/error.h"

namespace ddp {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, size_t count) : backend_(&backend), count_(count) {
    if (count_ > 0) {
      data_ = static_cast<T*>(backend.allocate_bytes(count_ * sizeof(T)));
      backend.count_allocation(count_ * sizeof(T));
    }
  }
  ~Buffer() { release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t count() const { return count_; }
  size_t size_bytes() const { return count_ * sizeof(T); }
  Backend& backend() const { return *backend_; }

  void upload(const T* host, size_t count, size_t offset = 0) {
    DDP_REQUIRE(offset + count <= count_, "upload past the end of a Buffer");
    if (count) backend_->copy_to_device(data_ + offset, host, count * sizeof(T));
  }
  void upload(const std::vector<T>& host) { upload(host.data(), host.size()); }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_) backend_->copy_to_host(host.data(), data_, size_bytes());
    return host;
  }
  void zero() {
    if (count_) backend_->fill_zero(data_, size_bytes());
  }

 private:
  void release() noexcept {
    if (data_) {
      backend_->free_bytes(data_);
      backend_->count_release(count_ * sizeof(T));
    }
    data_ = nullptr;
    count_ = 0;
  }
  void swap(Buffer& o) noexcept {
    std::swap(backend_, o.backend_);
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
  }

  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace ddp
