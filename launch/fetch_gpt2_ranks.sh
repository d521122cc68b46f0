#!/usr/bin/env bash
# fetch_gpt2_ranks.sh DIR: GPT-2's byte-pair-encoding ranks, tiktoken's
# r50k_base table, as DIR/gpt2.tiktoken (835,554 bytes: 50,256 lines of
# "<base64 token> <rank>", the 256 single bytes and the 50,000 merges; the
# special token <|endoftext|> = 50256 is not in the file), for ddp_tokenize:
#
#   launch/fetch_gpt2_ranks.sh data && build/ddp_tokenize --tokenizer gpt2 --ranks data/gpt2.tiktoken in.txt -o in.bin
#
# Source: PyPI's openai-whisper 20250625 (OpenAI, MIT licence), its source
# archive only: `pip download --no-deps --no-binary :all:` fetches the sdist
# (its sha256 checked), of which the one file whisper/assets/gpt2.tiktoken is
# extracted; the package is never installed (nothing of it runs). No registry
# serves the table as data; whisper ships it for its own tokenizer.
# The file's sha256 is the one tiktoken pins for r50k_base
# (tiktoken_ext/openai_public.py, `expected_hash` of r50k_base.tiktoken), so
# it is the table tiktoken itself loads for GPT-2.
#
# Idempotent: a DIR/gpt2.tiktoken of the expected size and sha256 is kept
# (and said so); one that differs is refused, never overwritten. Needs
# network access to PyPI and python3 with pip. Prints the size and sha256.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: launch/fetch_gpt2_ranks.sh DIR   (writes DIR/gpt2.tiktoken)" >&2
  exit 2
fi
dir=$1
out=$dir/gpt2.tiktoken
ranks_bytes=835554
ranks_sha256=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930  # tiktoken's r50k_base pin
version=20250625
sdist=openai_whisper-$version.tar.gz
sdist_sha256=37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96
member=openai_whisper-$version/whisper/assets/gpt2.tiktoken

describe() {  # "<bytes> bytes, sha256 <hex>"
  echo "$(stat -c %s "$1") bytes, sha256 $(sha256sum "$1" | cut -d' ' -f1)"
}

if [ -e "$out" ]; then
  if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$ranks_bytes" ] &&
     [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$ranks_sha256" ]; then
    echo "fetch_gpt2_ranks: $out already present ($(describe "$out")); nothing to do"
    exit 0
  fi
  echo "fetch_gpt2_ranks: $out exists and is not GPT-2's r50k_base ranks ($ranks_bytes bytes, sha256 $ranks_sha256); move it away first" >&2
  exit 1
fi
mkdir -p "$dir"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch_gpt2_ranks: downloading the source archive of PyPI's openai-whisper $version (not installing it)"
python3 -m pip download --quiet --no-deps --no-binary :all: "openai-whisper==$version" -d "$work/dl" ||
  { echo "fetch_gpt2_ranks: pip download of openai-whisper==$version failed (is PyPI reachable?)" >&2; exit 1; }
got=$(sha256sum "$work/dl/$sdist" | cut -d' ' -f1)
if [ "$got" != "$sdist_sha256" ]; then
  echo "fetch_gpt2_ranks: $sdist has sha256 $got, expected $sdist_sha256; not using it" >&2
  exit 1
fi
tar -xzf "$work/dl/$sdist" -C "$work" "$member" "openai_whisper-$version/LICENSE"
grep -q "MIT License" "$work/openai_whisper-$version/LICENSE" ||
  { echo "fetch_gpt2_ranks: the archive's LICENSE no longer states MIT; check the licence" >&2; exit 1; }
got=$(sha256sum "$work/$member" | cut -d' ' -f1)
if [ "$got" != "$ranks_sha256" ]; then
  echo "fetch_gpt2_ranks: $member has sha256 $got, not tiktoken's r50k_base $ranks_sha256" >&2
  exit 1
fi
mv "$work/$member" "$out.part"  # same directory as $out: the rename is atomic
mv "$out.part" "$out"
echo "fetch_gpt2_ranks: wrote $out ($(describe "$out")); GPT-2's r50k_base ranks, from openai-whisper $version (MIT, OpenAI)"
