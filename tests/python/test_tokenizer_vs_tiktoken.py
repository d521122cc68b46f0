#!/usr/bin/env python3
"""test_tokenizer_vs_tiktoken.py: ddp_tokenize's GPT-2 ids against tiktoken's (PyPI), both on
the same local ranks file (launch/fetch_gpt2_ranks.sh) and tiktoken's own r50k_base pattern.

  python3 tests/python/test_tokenizer_vs_tiktoken.py BUILD/ddp_tokenize RANKS [SEED]

Each input file is one document: ours must equal [50256] + enc.encode_ordinary(text) per file.
(a) ASCII prose, 3 MB generated from the seed (the test command does not fetch the
    Shakespeare corpus; launch/bench_tokenizer.py compares on it), 3 chunks of 1 MB;
(b) Unicode, 1.5 M characters generated (every script's letters with combining marks, every
    kind of digit, symbols, emoji sequences, control, format and space characters), at
    --threads 1 and --threads 3 (identical ids both ways);
(c) edge cases (lone spaces, CRLF, trailing whitespace, 'S against 's, <|endoftext|> as
    text, long runs), one file each, in one run;
(d) ill-formed UTF-8: ours must equal tiktoken's ids of bytes.decode("utf-8", "replace");
(e) decoding: tiktoken's decode_bytes of our ids gives back each valid file's bytes;
(f) an empty input, an llm.c token shard (already tokenized) and a ranks file that is not
    r50k_base are refused in one line, exit 1, no output written;
(g) an earlier output of ours is replaced, saying so; a user's file only with --overwrite; an
    input is never the output.
Exits 77 (ctest's SKIP_RETURN_CODE), saying why, when tiktoken or the ranks file is missing.
"""
import os
import random
import subprocess
import sys
import tempfile
import time

SKIP = 77
try:
    import numpy as np
    import tiktoken  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (launch/install_deps.sh installs PyPI's tiktoken for /usr/bin/python3)")
    sys.exit(SKIP)

from ddp_tools.tokenizer import tiktoken_gpt2, tokenizer_texts

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    assert header[0] == 20240520 and header[1] == 1, f"{path}: not an llm.c shard"
    tokens = np.frombuffer(data[1024:], dtype="<u2")
    assert header[2] == len(tokens), f"{path}: count {header[2]} != {len(tokens)}"
    return [int(t) for t in tokens]


def run_ours(tool, ranks, files, out, threads=2, expect_ok=True):
    cmd = [tool, "--tokenizer", "gpt2", "--ranks", ranks, *files, "-o", out, "--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r


def expected_ids(enc, texts):
    ids = []
    for t in texts:
        ids.append(tiktoken_gpt2.END_OF_TEXT)
        ids.extend(enc.encode_ordinary(t))
    return ids


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(name, ours, ref):
    same = ours == ref
    detail = f"{len(ref)} ids" if same else (f"ours {len(ours)} ids, tiktoken {len(ref)}, first difference at "
                                             f"{first_difference(ours, ref)}")
    check(same, f"{name}: ids equal tiktoken's ({detail})")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    tool, ranks = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(2 ** 31)
    if not os.path.isfile(ranks):
        print(f"SKIP: no ranks file at {ranks} (launch/test.sh fetches it: launch/fetch_gpt2_ranks.sh data)")
        return SKIP
    print(f"seed {seed} (rerun: {sys.argv[0]} {tool} {ranks} {seed}); Python's Unicode "
          f"{tokenizer_texts.unicode_version()}")
    enc = tiktoken_gpt2.load_encoding(ranks)
    rng = tokenizer_texts.new_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, data):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
            return path

        # (a) ASCII prose, 3 chunks.
        ascii_text = tokenizer_texts.ascii_text(rng, 3_000_000)
        t0 = time.time()
        run_ours(tool, ranks, [write("ascii.txt", ascii_text)], os.path.join(tmp, "ascii.bin"))
        ours = read_shard(os.path.join(tmp, "ascii.bin"))
        compare(f"(a) ASCII prose, {len(ascii_text) / 1e6:.1f} MB", ours, expected_ids(enc, [ascii_text]))
        check(enc.decode_bytes(ours[1:]) == ascii_text.encode(), "(e) ASCII prose: decode gives back the bytes")

        # (b) Unicode, at 1 and 3 threads.
        uni = tokenizer_texts.unicode_text(rng, 1_500_000)
        uni_path = write("unicode.txt", uni)
        ref = expected_ids(enc, [uni])
        run_ours(tool, ranks, [uni_path], os.path.join(tmp, "u1.bin"), threads=1)
        run_ours(tool, ranks, [uni_path], os.path.join(tmp, "u3.bin"), threads=3)
        u1 = read_shard(os.path.join(tmp, "u1.bin"))
        u3 = read_shard(os.path.join(tmp, "u3.bin"))
        mb = len(uni.encode("utf-8")) / 1e6
        compare(f"(b) generated Unicode, {mb:.1f} MB, --threads 1", u1, ref)
        check(u1 == u3, "(b) generated Unicode: --threads 3 gives the ids of --threads 1")
        check(enc.decode_bytes(u1[1:]) == uni.encode("utf-8"), "(e) Unicode: decode gives back the bytes")

        # (c) edge cases, one document each.
        cases = tokenizer_texts.edge_cases()
        paths = [write(f"edge{i}.txt", t) for i, t in enumerate(cases)]
        run_ours(tool, ranks, paths, os.path.join(tmp, "edge.bin"))
        ours = read_shard(os.path.join(tmp, "edge.bin"))
        ref = expected_ids(enc, cases)
        compare(f"(c) {len(cases)} edge cases", ours, ref)
        if ours != ref:  # name the first case that differs
            for i, t in enumerate(cases):
                run_ours(tool, ranks, [write(f"one{i}.txt", t)], os.path.join(tmp, f"one{i}.bin"))
                got = read_shard(os.path.join(tmp, f"one{i}.bin"))
                if got != expected_ids(enc, [t]):
                    print(f"     first differing case {t[:40]!r}: ours {got[:12]}, "
                          f"tiktoken {expected_ids(enc, [t])[:12]}")
                    break

        # (d) ill-formed UTF-8.
        docs = [tokenizer_texts.invalid_utf8(rng, rng.randint(1, 4000)) for _ in range(40)]
        paths = [write(f"bad{i}.txt", d) for i, d in enumerate(docs)]
        r = run_ours(tool, ranks, paths, os.path.join(tmp, "bad.bin"))
        ours = read_shard(os.path.join(tmp, "bad.bin"))
        compare("(d) 40 files of ill-formed UTF-8, as decode(errors='replace')", ours,
                expected_ids(enc, [d.decode("utf-8", "replace") for d in docs]))
        check("U+FFFD" in r.stderr, "(d) the replacement is said on stderr")

        # (f) refusals.
        out = os.path.join(tmp, "never.bin")
        r = run_ours(tool, ranks, [write("empty.txt", b"")], out, expect_ok=False)
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "empty" in r.stderr
              and not os.path.exists(out), f"(f) an empty input is refused in one line: {r.stderr.strip()}")
        with open(ranks, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        other = write("other.tiktoken", b"".join(lines[:-1]))  # r50k_base less its last merge
        r = run_ours(tool, other, [write("x.txt", "x")], out, expect_ok=False)
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "r50k_base" in r.stderr
              and not os.path.exists(out), f"(f) another ranks table is refused in one line: {r.stderr.strip()}")
        r = run_ours(tool, ranks, [os.path.join(tmp, "ascii.bin")], out, expect_ok=False)
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "already an llm.c .bin token shard"
              in r.stderr and not os.path.exists(out),
              f"(f) a token shard given as text is refused in one line: {r.stderr.strip()}")
        # (g) the output rule (trainer/io/output_registry.h): an earlier output of ours is replaced, saying
        # so; anyone else's file only with --overwrite; an input never.
        shard = os.path.join(tmp, "ascii.bin")
        r = subprocess.run([tool, "--tokenizer", "gpt2", "--ranks", ranks, write("y.txt", "y"), "-o", shard],
                           capture_output=True, text=True)
        check(r.returncode == 0 and "replacing it (written by" in r.stderr
              and read_shard(shard) == expected_ids(enc, ["y"]),
              f"(g) an earlier shard of ours is replaced, saying so: {r.stderr.strip()}")
        notes = write("notes.txt", "my notes")
        r = subprocess.run([tool, "--tokenizer", "gpt2", "--ranks", ranks, write("z.txt", "z"), "-o", notes],
                           capture_output=True, text=True)
        check(r.returncode == 1 and "--overwrite" in r.stderr and open(notes).read() == "my notes",
              f"(g) a file of the user's is refused and kept: {r.stderr.strip()}")
        r = subprocess.run([tool, "--tokenizer", "gpt2", "--ranks", ranks, notes, "-o", notes, "--overwrite"],
                           capture_output=True, text=True)
        check(r.returncode == 1 and "is one of the inputs" in r.stderr, f"(g) an input is never the output: "
              f"{r.stderr.strip()}")
        r = subprocess.run([tool, "--tokenizer", "gpt2", "--ranks", ranks, write("z.txt", "z"), "-o", notes,
                            "--overwrite"], capture_output=True, text=True)
        check(r.returncode == 0 and "replacing it (--overwrite)" in r.stderr
              and read_shard(notes) == expected_ids(enc, ["z"]),
              f"(g) --overwrite replaces the user's file, saying so: {r.stderr.strip()}")
    print(f"{time.time() - t0:.1f} s")
    if FAILURES:
        print(f"{len(FAILURES)} FAILED (seed {seed})")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
