#!/usr/bin/env python3
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

Tolerance: ddp_train evaluates in FP16, so its figures match the fp16 column
up to summation order (FP32 sums in another order, then FP16 rounding: an
ulp of FP16 on a logit now and then), which flips only a prediction whose two
best logits are within about 1e-3: accuracy within 0.1 percentage point and
loss within 0.5% relative (ACC_TOL_PP, LOSS_TOL_REL). The fp32 column is
shown for reference: it differs from ours by FP16 rounding itself. Exits 1
when ours and the fp16 column are further apart than that.

  launch/torch_load_weights.py --weights w.safetensors --layers 784,512,512,10 \\
      --activation relu --metrics run.jsonl [--data-dir /usr/share/datasets/fashion-mnist | --test-x X.npy --test-y Y.npy]

Needs torch, numpy and safetensors (/usr/bin/python3 after
launch/install_deps.sh and launch/install_bench_deps.sh).
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import safetensors.torch

ACC_TOL_PP = 0.1
LOSS_TOL_REL = 0.005


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


def ours_from_metrics(path):
    summary = None
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("event") == "summary":
                summary = record
    if summary is None:
        raise SystemExit(f"{path}: no summary record (did the run finish?)")
    return summary["test_accuracy"], summary["test_loss"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", required=True, help="ddp_train --save-weights W.safetensors")
    p.add_argument("--layers", required=True, help="the run's --layers")
    p.add_argument("--activation", default="relu", choices=["relu", "gelu"])
    p.add_argument("--metrics", help="the run's --metrics file (its summary record is ours)")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--test-x")
    p.add_argument("--test-y")
    args = p.parse_args()
    widths = [int(w) for w in args.layers.split(",")]

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
    if not args.metrics:
        return 0
    acc, loss = ours_from_metrics(args.metrics)
    print(f"{'ddp_train':10s} {100 * acc:9.2f}% {loss:10.4f}")
    d_acc, d_loss = 100 * abs(acc - acc16), abs(loss - loss16) / max(abs(loss16), 1e-12)
    ok = d_acc <= ACC_TOL_PP and d_loss <= LOSS_TOL_REL
    print(f"ours vs torch fp16: accuracy {d_acc:.2f} pp (tolerance {ACC_TOL_PP}), loss {100 * d_loss:.3f}% "
          f"(tolerance {100 * LOSS_TOL_REL:.1f}%): {'within' if ok else 'OUTSIDE'} FP16 tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
