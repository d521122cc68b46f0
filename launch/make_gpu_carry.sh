#!/usr/bin/env bash
# make_gpu_carry.sh: builds the CUDA binaries here and packs what the GPU host
# needs to run them into .gpu-carry/ (ignored by git), for the device tool's
# `carry`, so that launch/gpu_check.sh spends no device time compiling.
#
#   launch/make_gpu_carry.sh [--build-dir DIR] [--jobs N] [--fashion-mnist DIR]
#                            [--train-samples N]
#
# 1. Builds ddp_train, tests/ddp_cuda_tests and bench_kernels in DIR (default
#    build-gpu-carry; configured here when it has no CMakeCache.txt) with
#    -DDDP_CUDA=ON -DDDP_MPI=OFF (the GPU host has no Open MPI)
#    -DCMAKE_CUDA_ARCHITECTURES=90 (the H100 and H200), at nice 10 and -j N
#    (default 2); quick when DIR is up to date. A DIR configured with MPI or
#    without sm_90 is refused. Always built, so that the stamp's hash of the
#    sources is the hash of what the binaries were built from.
# 2. Strips them (the CUDA fat binaries are kept) and copies beside them every
#    shared library they load here except those the GPU host has: glibc,
#    libstdc++, libgcc_s, and CUDA's libraries other than the runtime (cuBLAS,
#    cuBLASLt and NCCL are the host's, from its toolkit or PyTorch's wheels).
#    libcudart is carried: the runtime the binaries were built with.
# 3. Adds a Fashion-MNIST subset (the first N, default 20000, training images
#    and the 10000 test images, unpacked IDX) for gpu_check's MLP run, and a
#    stamp (commit, the sources' hash, nvcc, the newest glibc and libstdc++
#    symbol versions the binaries need).
# 4. Checks the bundle: every library resolves from it and the toolkit here
#    (`ldd -r`), `ddp_train --help` and `ddp_cuda_tests --gtest_list_tests`
#    run with it; then packs it as .gpu-carry/gpu-carry.tar.xz and writes
#    .gpu-carry/MANIFEST.txt with the sizes: the tarball and the tree that
#    travels beside it, against the device tool's 64 MiB.
#
# Then, on a session lent a GPU: run `OUT=... bash launch/gpu_check.sh` with
# carry [".gpu-carry"] and timeout_s 600.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=scripts/gpu_carry.sh
source launch/scripts/gpu_carry.sh

BUILD=build-gpu-carry
JOBS=2
FMNIST=/usr/share/datasets/fashion-mnist
[ -d "$FMNIST" ] || FMNIST=/tmp/kit/usr/share/datasets/fashion-mnist
TRAIN_SAMPLES=20000
TRANSFER_LIMIT_MIB=${GPU_CARRY_LIMIT_MIB:-48}   # refuse above this: the tool's limit is 64 MiB in all
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --fashion-mnist) FMNIST=$2; shift 2 ;;
    --train-samples) TRAIN_SAMPLES=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "make_gpu_carry: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "make_gpu_carry: $*"; }
die() { echo "make_gpu_carry: $*" >&2; exit 1; }
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH

# ---- 1. build -----------------------------------------------------------------
BINS=(ddp_train tests/ddp_cuda_tests bench_kernels)
cache=$BUILD/CMakeCache.txt
if [ ! -f "$cache" ]; then
  say "configuring $BUILD"
  mkdir -p "$BUILD"
  nice -n 10 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDDP_CUDA=ON -DDDP_MPI=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DDDP_BUILD_TESTS=ON >"$BUILD/make_gpu_carry.configure.log" 2>&1 ||
    { cat "$BUILD/make_gpu_carry.configure.log"; die "configure failed"; }
fi
grep -qE '^DDP_MPI:BOOL=(OFF|0|FALSE)' "$cache" ||
  die "$BUILD is built with MPI (libmpi is not on the GPU host): configure it with -DDDP_MPI=OFF"
grep -qE '^CMAKE_CUDA_ARCHITECTURES:[A-Z]+=(.*;)?90(a)?(-real|-virtual)?(;|$)' "$cache" ||
  die "$BUILD has no sm_90 code (CMAKE_CUDA_ARCHITECTURES): the H100 and H200 need 90"
say "building ${BINS[*]} in $BUILD (-j$JOBS, nice 10)"
nice -n 10 cmake --build "$BUILD" -j "$JOBS" --target ddp_train ddp_cuda_tests bench_kernels
for b in "${BINS[@]}"; do [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing after the build"; done

# ---- 2. binaries and libraries ---------------------------------------------------
DEST=$ROOT/$GPU_CARRY_DIR
STAGE=$DEST/stage
rm -rf "$STAGE" && mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/data"
for b in "${BINS[@]}"; do
  strip --strip-unneeded -o "$STAGE/bin/$(basename "$b")" "$BUILD/$b"
  readelf -S "$STAGE/bin/$(basename "$b")" | grep -q nv_fatbin || die "stripping $b lost its CUDA code (.nv_fatbin)"
done
# What the GPU host has, and what it must not get from us: the C and C++
# runtimes (newer there) and CUDA's big libraries (cuBLAS, cuBLASLt, NCCL).
host_has='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libnccl|libcuda)\.so'
for b in "$STAGE"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  [[ $soname =~ $host_has ]] && continue
  cp -L "$path" "$STAGE/lib/$soname"
done
say "libraries carried: $(cd "$STAGE/lib" && ls | tr '\n' ' ')"

# ---- 3. data and stamp --------------------------------------------------------------
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || die "no Fashion-MNIST in $FMNIST (--fashion-mnist DIR)"
python3 - "$FMNIST" "$STAGE/data/fashion-mnist" "$TRAIN_SAMPLES" <<'PY'
import gzip, os, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
def cut(name, count, header):
    raw = gzip.open(os.path.join(src, name + ".gz")).read()
    dims = struct.unpack(">" + "I" * (header // 4), raw[:header])
    count = min(count, dims[1]) if count else dims[1]
    item = 1
    for d in dims[2:]:
        item *= d
    body = raw[header:header + count * item]
    open(os.path.join(dst, name), "wb").write(struct.pack(">" + "I" * (header // 4), dims[0], count, *dims[2:]) + body)
    return count
got = cut("train-images-idx3-ubyte", n, 16)
cut("train-labels-idx1-ubyte", n, 8)
cut("t10k-images-idx3-ubyte", 0, 16)
cut("t10k-labels-idx1-ubyte", 0, 8)
print(f"make_gpu_carry: Fashion-MNIST: {got} training and 10000 test images")
PY
# The newest glibc and libstdc++ symbol versions they need: the host's must
# have them (Ubuntu 24.04: glibc 2.39, GLIBCXX_3.4.33).
needs() { for b in "$STAGE"/bin/* "$STAGE"/lib/*; do objdump -T "$b"; done 2>/dev/null | grep -oE "$1" | sort -V -u | tail -1; }
glibc_max=$(needs 'GLIBC_2\.[0-9]+')
glibcxx_max=$(needs 'GLIBCXX_3\.4\.[0-9]+')
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- '*.h' '*.cpp' '*.cu' '*.cuh' '*.cmake' '*CMakeLists.txt' 2>/dev/null || commit="$commit+uncommitted"
{
  echo "commit $commit"
  echo "sources $(gpu_carry_source_hash "$ROOT")"
  echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1 | awk '{print "glibc", $NF}')"
  echo "nvcc $(nvcc --version | grep -oE 'release [0-9.]+, V[0-9.]+' || echo '?')"
  echo "cuda_architectures $(grep -oP '^CMAKE_CUDA_ARCHITECTURES:[A-Z]+=\K.*' "$cache")"
  echo "nccl $(grep -oP '^NCCL_LIBRARY:FILEPATH=\K.*' "$cache" || echo none) (the host's libnccl.so.2 is used)"
  echo "glibc_needed $glibc_max $glibcxx_max"
  echo "fashion_mnist_train $TRAIN_SAMPLES"
} >"$STAGE/$GPU_CARRY_STAMP"

# ---- 4. check, pack, measure -------------------------------------------------------------
cuda_lib=$(dirname "$(readlink -f "$(command -v nvcc)")")/../lib
missing=$(for b in "$STAGE"/bin/*; do LD_LIBRARY_PATH="$STAGE/lib:$cuda_lib" ldd -r "$b" 2>&1; done |
          grep -E 'not found|undefined symbol' | sort -u || true)
[ -z "$missing" ] || die "the bundle does not resolve: $missing"
LD_LIBRARY_PATH="$STAGE/lib:$cuda_lib" "$STAGE/bin/ddp_train" --help >/dev/null || die "ddp_train --help fails from the bundle"
ntests=$(LD_LIBRARY_PATH="$STAGE/lib:$cuda_lib" "$STAGE/bin/ddp_cuda_tests" --gtest_list_tests | grep -c '^  ') ||
  die "ddp_cuda_tests --gtest_list_tests fails from the bundle"
echo "cuda_tests $ntests" >>"$STAGE/$GPU_CARRY_STAMP"
say "bundle checked: every library resolves, ddp_train --help runs, $ntests CUDA tests listed"

rm -f "$DEST/$GPU_CARRY_TARBALL"
say "packing $GPU_CARRY_DIR/$GPU_CARRY_TARBALL (xz -T$JOBS, nice 10)"
tar -C "$STAGE" -cf - . | nice -n 10 xz -6 -T"$JOBS" >"$DEST/$GPU_CARRY_TARBALL"
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
tar_b=$(stat -c %s "$DEST/$GPU_CARRY_TARBALL")
unpacked_b=$(du -sb "$STAGE" | cut -f1)
# The tree that travels with it: tracked files and untracked ones git does
# not ignore (the device tool's rule).
tree_b=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
         awk '{n += $1} END {print n + 0}')
total_b=$((tar_b + tree_b))
{
  echo "# .gpu-carry: the carried CUDA build (launch/make_gpu_carry.sh), $(date -u '+%Y-%m-%d %H:%M UTC')"
  cat "$STAGE/$GPU_CARRY_STAMP"
  echo
  echo "files in $GPU_CARRY_TARBALL (bytes unpacked):"
  (cd "$STAGE" && find . -type f -printf '%s %p\n' | sort -k2)
  echo
  echo "unpacked $(mib "$unpacked_b") MiB, $GPU_CARRY_TARBALL $(mib "$tar_b") MiB"
  echo "tree that travels beside it (tracked + untracked not ignored): $(mib "$tree_b") MiB"
  echo "transfer in all: $(mib "$total_b") MiB of the device tool's 64 MiB"
} >"$DEST/MANIFEST.txt"
rm -rf "$STAGE"
say "$GPU_CARRY_TARBALL $(mib "$tar_b") MiB ($(mib "$unpacked_b") MiB unpacked) + tree $(mib "$tree_b") MiB = $(mib "$total_b") MiB of 64 MiB"
[ "$total_b" -le $((TRANSFER_LIMIT_MIB * 1048576)) ] ||
  die "the transfer ($(mib "$total_b") MiB) is over ${TRANSFER_LIMIT_MIB} MiB: carry less"
