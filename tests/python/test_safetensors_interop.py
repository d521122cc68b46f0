#!/usr/bin/env python3
"""test_safetensors_interop.py: ddp_train's safetensors files against the
reference implementation (PyPI `safetensors`, with numpy; torch where it is
installed).

  python3 tests/python/test_safetensors_interop.py BUILD/ddp_train

(a) --save-weights out.safetensors is read by safetensors.numpy.load_file:
    the MLP's state_dict names, shapes, float32, and values equal to the
    same run's .npy export (two runs, same seed and flags); with torch, it
    loads strictly into the equivalent nn.Sequential.
(b) A state_dict the reference writes in F32, F16 and BF16 (BF16 through
    safetensors.torch when torch is there, else its bytes by hand) starts a
    run (--init-weights, one step that cannot move a weight) whose saved
    weights equal the file's, widened exactly.
(c) A file with a missing, an extra or a mis-shaped tensor is refused in
    one line naming that tensor, and nothing is saved.
(d) A checkpoint (format 2, an AdamW run's) is read by the reference: the
    weights under their names equal the same run's --save-weights, one
    exp_avg and exp_avg_sq tensor per weight (exp_avg_sq >= 0), and the
    training state in __metadata__ (format version 2, the step).
(e) --save-weights-dtype fp16 and bf16 files are read by the reference as
    F16 / BF16 tensors whose bits are numpy's float16 / torch's bfloat16 of
    the same run's F32 export.

Exits 77 (ctest's SKIP_RETURN_CODE) when numpy or safetensors is missing.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import numpy as np
    import safetensors
    import safetensors.numpy
except ImportError as e:
    print(f"SKIP: {e} (launch/install_deps.sh installs numpy and safetensors for /usr/bin/python3)")
    sys.exit(SKIP)
try:
    import torch
    import safetensors.torch
except ImportError:
    torch = None

WIDTHS = [10, 12, 7, 10]  # --data synthetic: 10 features, 10 targets
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def state_dict_shapes(widths):
    """The MLP's tensors as nn.Sequential names them: Linear i is module 2i."""
    shapes = {}
    for i in range(len(widths) - 1):
        shapes[f"{2 * i}.weight"] = (widths[i + 1], widths[i])
        shapes[f"{2 * i}.bias"] = (widths[i + 1],)
    return shapes


def run(binary, args, expect_ok=True):
    cmd = [binary, "--device", "cpu", "--threads", "1", "--data", "synthetic", "--synthetic-samples", "64",
           "--layers", ",".join(map(str, WIDTHS)), "--batch-size", "16", "--activation", "gelu"] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if expect_ok and r.returncode != 0:
        print(r.stdout)
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {r.returncode}")
    return r


def load_npy_dir(d):
    """ddp_train's .npy export: layer<i>.{weight,bias}.npy, as state_dict names."""
    out = {}
    for i in range(len(WIDTHS) - 1):
        for kind in ("weight", "bias"):
            out[f"{2 * i}.{kind}"] = np.load(os.path.join(d, f"layer{i}.{kind}.npy"))
    return out


def test_ddp_train_file_reads_in_reference(binary, tmp, seed):
    st = os.path.join(tmp, "out.safetensors")
    npy = os.path.join(tmp, "npy")
    flags = ["--steps", "3", "--seed", str(seed)]
    run(binary, flags + ["--save-weights", st])
    run(binary, flags + ["--save-weights", npy])
    tensors = safetensors.numpy.load_file(st)
    want = load_npy_dir(npy)
    shapes = state_dict_shapes(WIDTHS)
    check(set(tensors) == set(shapes), f"(a) names {sorted(tensors)} are the state_dict's")
    for name, shape in shapes.items():
        t = tensors.get(name)
        check(t is not None and t.dtype == np.float32 and t.shape == shape,
              f"(a) {name}: float32 {shape} (got {None if t is None else (t.dtype, t.shape)})")
        check(t is not None and np.array_equal(t, want[name]), f"(a) {name}: values equal the .npy export")
    with safetensors.safe_open(st, framework="numpy") as f:
        check(f.metadata() == {"format": "pt"}, f"(a) metadata {f.metadata()}")
    if torch is not None:
        layers = []
        for i in range(len(WIDTHS) - 1):
            layers.append(torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
            if i + 2 < len(WIDTHS):
                layers.append(torch.nn.GELU(approximate="tanh"))
        model = torch.nn.Sequential(*layers)
        result = model.load_state_dict(safetensors.torch.load_file(st), strict=True)
        check(not result.missing_keys and not result.unexpected_keys, "(a) torch: strict load into nn.Sequential")
    else:
        print("note: torch not installed; the nn.Sequential load is not checked here")


def random_state_dict(rng):
    return {name: rng.uniform(-1, 1, size=shape).astype(np.float32) for name, shape in state_dict_shapes(WIDTHS).items()}


def write_bf16_by_hand(path, sd):
    """BF16 without torch: the top 16 bits of each float32 (truncation), and
    a header as the format's README gives it."""
    header, blobs, offset = {}, [], 0
    for name, a in sd.items():
        b = (np.ascontiguousarray(a).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16_as_float32(a):
    return ((np.ascontiguousarray(a).view(np.uint32) >> 16) << 16).view(np.float32)


def test_reference_file_starts_a_run(binary, tmp, rng):
    sd = random_state_dict(rng)
    variants = {"F32": (sd, lambda p: safetensors.numpy.save_file(sd, p)),
                "F16": ({k: v.astype(np.float16).astype(np.float32) for k, v in sd.items()},
                        lambda p: safetensors.numpy.save_file({k: v.astype(np.float16) for k, v in sd.items()}, p))}
    if torch is not None:
        bf = {k: torch.from_numpy(v).to(torch.bfloat16) for k, v in sd.items()}
        variants["BF16"] = ({k: v.float().numpy() for k, v in bf.items()},
                            lambda p: safetensors.torch.save_file(bf, p))
    else:
        variants["BF16"] = ({k: bf16_as_float32(v) for k, v in sd.items()}, lambda p: write_bf16_by_hand(p, sd))
    for dtype, (want, write) in variants.items():
        path = os.path.join(tmp, f"init_{dtype}.safetensors")
        write(path)
        out = os.path.join(tmp, f"saved_{dtype}")
        run(binary, ["--steps", "1", "--lr", "1e-30", "--momentum", "0", "--init-weights", path, "--save-weights", out])
        got = load_npy_dir(out)
        same = all(np.array_equal(got[k], want[k]) for k in want)
        check(same, f"(b) {dtype} state_dict: the saved weights equal the file's" +
              (" (torch wrote it)" if dtype == "BF16" and torch is not None else ""))


def test_wrong_tensors_refused(binary, tmp, rng):
    sd = random_state_dict(rng)
    missing = dict(sd)
    del missing["2.bias"]
    extra = dict(sd, **{"6.weight": np.zeros((3, 3), np.float32)})
    misshaped = dict(sd, **{"4.weight": np.zeros((WIDTHS[2], WIDTHS[3]), np.float32)})  # transposed
    for what, d, name, word in (("missing", missing, "2.bias", "missing"), ("extra", extra, "6.weight", "not a tensor"),
                                ("mis-shaped", misshaped, "4.weight", "shape")):
        path = os.path.join(tmp, f"{what}.safetensors")
        safetensors.numpy.save_file(d, path)
        out = os.path.join(tmp, f"never_{what}.safetensors")
        r = run(binary, ["--steps", "2", "--init-weights", path, "--save-weights", out], expect_ok=False)
        errors = [line for line in r.stdout.splitlines() if line.startswith("ddp_train: error")]
        ok = (r.returncode != 0 and len(errors) == 1 and f"tensor {name}" in errors[0] and word in errors[0]
              and f"{what}.safetensors" in errors[0] and not os.path.exists(out) and "step 1/" not in r.stdout)
        check(ok, f"(c) {what} tensor refused in one line: {errors}")


def test_dtypes_read_in_reference(binary, tmp, seed):
    """(e) --save-weights-dtype bf16 / fp16: the reference reads BF16 / F16 tensors whose bits are
    torch's conversion of the same run's F32 export (.to(torch.bfloat16), .half()); F16 with numpy
    alone where torch is absent (numpy has no bfloat16)."""
    flags = ["--steps", "3", "--seed", str(seed)]
    f32 = os.path.join(tmp, "e32.safetensors")
    run(binary, flags + ["--save-weights", f32])
    want = safetensors.numpy.load_file(f32)
    f16 = os.path.join(tmp, "e16.safetensors")
    run(binary, flags + ["--save-weights", f16, "--save-weights-dtype", "fp16"])
    got16 = safetensors.numpy.load_file(f16)
    for name, a in want.items():
        t = got16.get(name)
        check(t is not None and t.dtype == np.float16 and np.array_equal(t.view(np.uint16), a.astype(np.float16).view(
            np.uint16)), f"(e) {name}: F16, numpy's float16 of the F32 export bit for bit")
    if torch is None:
        print("note: torch not installed; the BF16 export is not checked here")
        return
    bf = os.path.join(tmp, "ebf.safetensors")
    run(binary, flags + ["--save-weights", bf, "--save-weights-dtype", "bf16"])
    got = safetensors.torch.load_file(bf)
    for name, a in want.items():
        t = got.get(name)
        ref = torch.from_numpy(a).to(torch.bfloat16)
        check(t is not None and t.dtype == torch.bfloat16 and torch.equal(t.view(torch.int16), ref.view(torch.int16)),
              f"(e) {name}: BF16, torch's .to(torch.bfloat16) of the F32 export bit for bit")


def test_checkpoint_reads_in_reference(binary, tmp, seed):
    ck = os.path.join(tmp, "ck")
    st = os.path.join(tmp, "adamw.safetensors")
    run(binary, ["--steps", "4", "--seed", str(seed), "--optimizer", "adamw", "--lr", "1e-3",
                 "--checkpoint-dir", ck, "--save-weights", st])
    path = os.path.join(ck, "ckpt-step000000000004.safetensors")
    check(os.path.exists(path), f"(d) the final checkpoint {os.path.basename(path)} exists")
    tensors = safetensors.numpy.load_file(path)
    weights = safetensors.numpy.load_file(st)
    shapes = state_dict_shapes(WIDTHS)
    want_names = set(shapes) | {f"optim.exp_avg.{n}" for n in shapes} | {f"optim.exp_avg_sq.{n}" for n in shapes}
    check(set(tensors) == want_names, f"(d) names: weights, optim.exp_avg.*, optim.exp_avg_sq.* ({len(tensors)})")
    for name in shapes:
        check(np.array_equal(tensors.get(name), weights[name]), f"(d) {name}: equals --save-weights of the run")
        sq = tensors.get(f"optim.exp_avg_sq.{name}")
        check(sq is not None and sq.dtype == np.float32 and sq.shape == shapes[name] and (sq >= 0).all(),
              f"(d) optim.exp_avg_sq.{name}: float32 {shapes[name]}, >= 0")
    with safetensors.safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    check(meta.get("ddp_train.checkpoint") == "2" and meta.get("step") == "4" and meta.get("optimizer") == "adamw",
          f"(d) metadata: format 2, step 4, adamw ({ {k: meta.get(k) for k in ('ddp_train.checkpoint', 'step')} })")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    binary = sys.argv[1]
    seed = random.SystemRandom().randrange(1 << 30)
    print(f"safetensors {safetensors.__version__}, numpy {np.__version__}, torch "
          f"{torch.__version__ if torch is not None else 'absent'}; seed {seed}")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        test_ddp_train_file_reads_in_reference(binary, tmp, seed % 100000)
        test_reference_file_starts_a_run(binary, tmp, rng)
        test_wrong_tensors_refused(binary, tmp, rng)
        test_checkpoint_reads_in_reference(binary, tmp, seed % 100000)
        test_dtypes_read_in_reference(binary, tmp, seed % 100000)
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
