// device_array.h: a typed cudaMalloc'd array for tests that call our
// kernels' launchers directly: under the SIMT executor (its exact-size
// allocations make one element past the end an error) and on a GPU.
// Uploads and downloads are synchronous.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp::test {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc of " + std::to_string(count * sizeof(T)) + " bytes failed");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  void upload(const std::vector<T>& host) {
    if (host.size() != count_) throw std::runtime_error("DeviceArray::upload: size mismatch");
    if (cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("DeviceArray::upload: cudaMemcpy failed");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error("DeviceArray::download: cudaMemcpy failed");
    return host;
  }
  T* get() { return data_; }
  const T* get() const { return data_; }
  size_t size() const { return count_; }

 private:
  size_t count_;
  T* data_ = nullptr;
};

}  // namespace ddp::test
