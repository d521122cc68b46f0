"""torch_load_weights.py: our exported weights in PyTorch, and its test-set
figures next to ours.

Loads `ddp_train --save-weights W.safetensors` with safetensors.torch into
the equivalent nn.Sequential (nn.Linear per layer of --layers, ReLU or
GELU(tanh) between them, none after the last; load_state_dict strict), runs
the test set through it and prints test accuracy and cross-entropy loss in
two precisions beside ddp_train's own (its metrics file's summary record):

  fp32   plain PyTorch FP32, what a user gets from model(x);
  fp16   our numerics contract emulated (DESIGN.md): inputs, weights and
         biases rounded to FP16, products summed in FP32, each layer's output
         rounded to FP16, the loss in FP32 from FP16 logits.

Per sample (unless --no-predict): the script writes the test features as
float32 .npy, runs `ddp_train --predict X.npy --predictions P.npy
--predict-output logits --init-weights W.safetensors` (--ddp-train PATH;
default build/ddp_train of this checkout) and compares our FP16 logits with
the fp16 column's, logit by logit and sample by sample:

  logits  |ours - torch fp16| <= LOGIT_TOL_ULPS FP16 ulps at the row's
          largest |logit| (the fp16 column's). Why the row's scale and not
          each logit's own: a logit is a sum of terms about as large as the
          row's biggest, so a one-ulp change upstream (a hidden unit that
          rounds the other way) moves every logit of the row by about the
          same absolute amount, and a logit near 0 (cancellation) would count
          that as thousands of its own ulps. Measured on Fashion-MNIST
          (launch/results/2026-12-01-cpu-torch-load-weights.md): at most 1
          such ulp with ReLU, 2 with GELU (its tanh is computed by another
          libm); the tolerance is 4.
  classes a sample whose argmax differs is allowed only where the fp16
          column's two best logits are within twice the row's tolerance of
          each other (each may move by the tolerance, towards the other);
          any other disagreement is a miss.

The cause of any difference: ddp_train sums FP32 products in BLAS's order,
PyTorch in its own, and the FP16 rounding of a layer's output then lands
an ulp apart now and then.

Test-set figures: ddp_train evaluates in FP16, so its figures (--metrics:
the summary record) match the fp16 column up to the same summation order,
which flips only a prediction whose two best logits are within about 1e-3:
accuracy within 0.1 percentage point and loss within 0.5% relative
(ACC_TOL_PP, LOSS_TOL_REL). The fp32 column is shown for reference: it
differs from ours by FP16 rounding itself. Exits 1 on any miss.

  launch/torch_load_weights.py --weights w.safetensors --layers 784,512,512,10 \\
      --activation relu [--metrics run.jsonl] [--ddp-train build/ddp_train]
      [--data-dir /usr/share/datasets/fashion-mnist | --test-x X.npy --test-y Y.npy]

Needs torch, numpy and safetensors (/usr/bin/python3 after
launch/install_deps.sh and launch/install_bench_deps.sh). Bad input (a flag,
a missing or foreign file) is one line and exit status 2, checked before
they are imported; one of them missing is one line and exit status 3.
"""
import argparse
import gzip
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

from ddp_tools.common import repo_paths, tool_files

# Imported here for the functions below, but needed only once the input is
# checked: without them, --help and bad input still get their answer.
try:
    import numpy as np
    import torch
    import safetensors.torch
except ImportError as missing:
    MISSING = missing.name
else:
    MISSING = None

PROGRAM = "torch_load_weights"
EXIT_BAD_INPUT = 2
EXIT_NO_DEPENDENCY = 3

ACC_TOL_PP = 0.1
LOSS_TOL_REL = 0.005
LOGIT_TOL_ULPS = 4  # FP16 ulps at the row's largest |logit|; see the docstring
REPO_ROOT = repo_paths.REPO


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_test_set(args):
    if args.test_x:
        x, y = np.load(args.test_x), np.load(args.test_y)
        x = x.astype(np.float32)  # u1 is not scaled (npy_io.h), as ours
        return x.reshape(len(x), -1), y.astype(np.int64)
    images = read_idx(os.path.join(args.data_dir, "t10k-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data_dir, "t10k-labels-idx1-ubyte.gz"))
    x = images.reshape(len(images), -1).astype(np.float32) / np.float32(255.0)  # as idx_reader.cpp scales
    return x, labels.astype(np.int64)


def build_model(widths, activation):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU() if activation == "relu" else torch.nn.GELU(approximate="tanh"))
    return torch.nn.Sequential(*layers)


def fp16(t):
    return t.half().float()


def forward_fp16_contract(model, x):
    h = fp16(x)
    for m in model:
        if isinstance(m, torch.nn.Linear):
            h = fp16(h @ fp16(m.weight).t() + fp16(m.bias))
        else:
            h = fp16(m(h))
    return h


def figures(logits, y):
    loss = torch.nn.functional.cross_entropy(logits.float(), y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    return acc, loss


def fp16_ulp(values):
    """The spacing of FP16 at each value's magnitude: 2^(e - 10) for a
    normal number of exponent e, 2^-24 for subnormals and 0."""
    _, exp = np.frexp(np.abs(values.astype(np.float32)))  # |v| = m * 2^exp, m in [0.5, 1)
    return np.ldexp(np.float32(1), np.maximum(exp - 1, -14) - 10).astype(np.float64)


def logits_from_ddp_train(args, x_np, widths):
    """Runs ddp_train --predict on the test features; returns its logits [N, K]."""
    with tempfile.TemporaryDirectory(prefix="torch_load_weights.") as tmp:
        x_path, out_path = os.path.join(tmp, "test_x.npy"), os.path.join(tmp, "logits.npy")
        np.save(x_path, np.ascontiguousarray(x_np, dtype=np.float32))
        cmd = [args.ddp_train, "--layers", args.layers, "--activation", args.activation,
               "--init-weights", args.weights, "--predict", x_path, "--predictions", out_path,
               "--predict-output", "logits"]
        try:
            run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            raise SystemExit(f"--ddp-train {args.ddp_train}: cannot run it ({e.strerror}); build it or give its path")
        if run.returncode != 0:
            raise SystemExit(f"ddp_train --predict failed (exit {run.returncode}): {run.stderr.strip()}")
        logits = np.load(out_path)
    if logits.shape != (len(x_np), widths[-1]):
        raise SystemExit(f"ddp_train --predict wrote logits of shape {logits.shape}, expected "
                         f"{(len(x_np), widths[-1])}")
    return logits


def compare_per_sample(ours, emulated):
    """Prints the per-logit and per-sample comparison; returns True when
    every logit is within tolerance and every class disagreement is a
    near-tie of the emulated model."""
    ours, emulated = ours.astype(np.float64), emulated.astype(np.float64)
    diff = np.abs(ours - emulated)
    row_ulp = fp16_ulp(np.abs(emulated).max(axis=1))  # [N]
    diff_ulps = diff / row_ulp[:, None]
    tol = LOGIT_TOL_ULPS * row_ulp  # [N], absolute
    misses = int((diff > tol[:, None]).sum())
    steps = np.ceil(diff_ulps).astype(np.int64)  # differences are whole ulps except below the row's binade
    spread = ", ".join(f"<= {k} ulp: {int((steps == k).sum())}" for k in range(1, LOGIT_TOL_ULPS + 1))
    print(f"per logit ({ours.size} = {ours.shape[0]} x {ours.shape[1]}): {int((diff == 0).sum())} identical, "
          f"{spread}, more: {int((steps > LOGIT_TOL_ULPS).sum())}; max |diff| {diff.max():.4g}, "
          f"max {diff_ulps.max():.2f} FP16 ulps at the row's largest |logit|; tolerance {LOGIT_TOL_ULPS} ulps: "
          f"{misses} outside")
    ours_class, emu_class = ours.argmax(1), emulated.argmax(1)  # first maximum, as torch.argmax and ours
    top2 = np.sort(emulated, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    differ = np.nonzero(ours_class != emu_class)[0]
    unexplained = [int(i) for i in differ if gap[i] > 2 * tol[i]]
    listed = "".join(f" sample {int(i)}: top-2 gap {gap[i]:.4g} (2 x tolerance {2 * tol[i]:.4g});" for i in differ[:10])
    print(f"per sample ({len(ours)}): predicted classes differ on {len(differ)};{listed} "
          f"{len(unexplained)} where the fp16 column's two best logits are further apart than 2 x tolerance")
    for i in unexplained[:10]:
        print(f"  sample {i}: ours class {ours_class[i]}, torch fp16 class {emu_class[i]}, "
              f"top-2 gap {gap[i]:.4g} > {2 * tol[i]:.4g}")
    ok = misses == 0 and not unexplained
    print(f"ours vs torch fp16 per sample: {'within' if ok else 'OUTSIDE'} FP16 tolerance")
    return ok


def fail(message, code=EXIT_BAD_INPUT):
    print(f"{PROGRAM}: error: {message}", file=sys.stderr)
    sys.exit(code)


def ours_from_metrics(path):
    """(test_accuracy, test_loss) of a metrics file's last summary record; fail() on bad input."""
    label = f"--metrics {path}"
    try:
        text = tool_files.read_text(path, label, what="a ddp_train --metrics file")
    except tool_files.FileError as e:
        fail(str(e))
    summary = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            fail(f"{label}: line {number} is not JSON (not a ddp_train --metrics file?)")
        if isinstance(record, dict) and record.get("event") == "summary":
            summary = record
    if summary is None:
        fail(f"{label}: no summary record (did the run finish?)")
    figures = [summary.get(key) for key in ("test_accuracy", "test_loss")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in figures):
        fail(f"{label}: its summary record has no finite test_accuracy and test_loss (not a classifier's run?)")
    return figures[0], figures[1]


def check_args(args):
    """The --layers widths, every file checked to exist and be readable: fail() on the first problem."""
    try:
        widths = [int(w) for w in args.layers.split(",")]
    except ValueError:
        fail(f"--layers {args.layers}: expected comma-separated integer widths")
    if len(widths) < 2 or min(widths) < 1:
        fail(f"--layers {args.layers}: expected at least two widths, each >= 1")
    if (args.test_x is None) != (args.test_y is None):
        fail("--test-x and --test-y: give both (features and labels) or neither")
    files = [("--weights", args.weights)]
    if args.test_x:
        files += [("--test-x", args.test_x), ("--test-y", args.test_y)]
    else:
        files += [("--data-dir", os.path.join(args.data_dir, name))
                  for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")]
    try:
        for flag, path in files:  # read lazily by their libraries, so no size cap
            tool_files.check_input(path, f"{flag} {path}", limit=math.inf)
    except tool_files.FileError as e:
        fail(str(e))
    if not args.no_predict and not (os.path.isfile(args.ddp_train) and os.access(args.ddp_train, os.X_OK)):
        fail(f"--ddp-train {args.ddp_train}: not an executable file (build it, give its path, or --no-predict)")
    return widths


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", required=True, help="ddp_train --save-weights W.safetensors")
    p.add_argument("--layers", required=True, help="the run's --layers")
    p.add_argument("--activation", default="relu", choices=["relu", "gelu"])
    p.add_argument("--metrics", help="the run's --metrics file (its summary record is ours)")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--test-x")
    p.add_argument("--test-y")
    p.add_argument("--ddp-train", default=os.path.join(REPO_ROOT, "build", "ddp_train"),
                   help="the ddp_train binary that runs --predict (default: build/ddp_train of this checkout)")
    p.add_argument("--no-predict", action="store_true",
                   help="skip the per-sample comparison (compare only the --metrics figures)")
    args = p.parse_args()
    widths = check_args(args)
    ours = ours_from_metrics(args.metrics) if args.metrics else None
    if MISSING:
        fail(f"{MISSING} is not installed for {sys.executable} (launch/install_deps.sh, "
             "launch/install_bench_deps.sh)", EXIT_NO_DEPENDENCY)

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = build_model(widths, args.activation)
    model.load_state_dict(safetensors.torch.load_file(args.weights), strict=True)
    model.eval()
    x_np, y_np = load_test_set(args)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    with torch.no_grad():
        logits32 = model(x)
        logits16 = forward_fp16_contract(model, x)
    acc32, loss32 = figures(logits32, y)
    acc16, loss16 = figures(logits16, y)
    agree = (logits32.argmax(1) == logits16.argmax(1)).float().mean().item()
    print(f"torch {torch.__version__}: {args.weights} loaded strictly into {model}".replace("\n", " "))
    print(f"test set: {len(y)} samples")
    print(f"{'':10s} {'accuracy':>10s} {'loss':>10s}")
    print(f"{'torch fp32':10s} {100 * acc32:9.2f}% {loss32:10.4f}")
    print(f"{'torch fp16':10s} {100 * acc16:9.2f}% {loss16:10.4f}   (fp32 and fp16 predictions agree on {100 * agree:.2f}%)")
    ok = True
    if not args.no_predict:
        ok = compare_per_sample(logits_from_ddp_train(args, x_np, widths), logits16.numpy()) and ok
    if ours is not None:
        acc, loss = ours
        print(f"{'ddp_train':10s} {100 * acc:9.2f}% {loss:10.4f}")
        d_acc, d_loss = 100 * abs(acc - acc16), abs(loss - loss16) / max(abs(loss16), 1e-12)
        figures_ok = d_acc <= ACC_TOL_PP and d_loss <= LOSS_TOL_REL
        print(f"ours vs torch fp16: accuracy {d_acc:.2f} pp (tolerance {ACC_TOL_PP}), loss {100 * d_loss:.3f}% "
              f"(tolerance {100 * LOSS_TOL_REL:.1f}%): {'within' if figures_ok else 'OUTSIDE'} FP16 tolerance")
        ok = figures_ok and ok
    return 0 if ok else 1


def cli():
    return main()


if __name__ == "__main__":
    sys.exit(cli())
