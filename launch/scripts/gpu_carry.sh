# shellcheck shell=bash
# gpu_carry.sh: what launch/make_gpu_carry.sh (which makes the carried build
# here) and launch/gpu_check.sh (which uses it on the GPU host) share. Sourced
# by both.
#
# The carried build is one folder, .gpu-carry/, ignored by git and named in the
# device tool's `carry`: GPU_CARRY_TARBALL (the stripped CUDA binaries, the
# shared libraries of the Debian packages they need that a GPU host lacks, a
# Fashion-MNIST subset, and GPU_CARRY_STAMP) and MANIFEST.txt (sizes, read
# here). bench_kernels travels in it for use by hand; gpu_check runs the
# other two binaries.
# shellcheck disable=SC2034  # read by the scripts that source this
GPU_CARRY_DIR=.gpu-carry
GPU_CARRY_TARBALL=gpu-carry.tar.xz
GPU_CARRY_STAMP=STAMP

# gpu_carry_source_hash ROOT: a short hash of every file a CUDA build reads
# (C++, CUDA and CMake sources under the folders that hold them, and the top
# CMakeLists.txt), by path and content. The same tree gives the same hash
# here and on the GPU host, where there is no git: a carried build whose
# stamp names another hash was built from other sources.
gpu_carry_source_hash() {
  (cd "$1" && find kernels comm trainer launch tests cmake CMakeLists.txt -type f \
      \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cmake' \
         -o -name CMakeLists.txt \) -not -path '*/__pycache__/*' -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}
