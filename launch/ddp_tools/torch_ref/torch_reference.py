"""torch_reference.py: the PyTorch peer of `ddp_train --bench`.

The same model and recipe as ours: an MLP of Linear layers (widths from
--layers) with ReLU between them (none after the last), softmax cross-entropy
(--loss xent) or mean squared error (--loss mse) on the last layer, SGD with
lr 0.05 (--lr) and momentum 0.9, on synthetic random data of the model's shape that
stays on the device. It times warm-up steps, then timed steps, and prints one
JSON line with the keys ours prints ("peer": "pytorch" marks it).

  --model gpt            the GPT of `ddp_train --bench --model gpt` instead
                         (launch/torch_gpt.py's module; --n-layer --n-head
                         --n-embd --block-size --vocab-size, AdamW with
                         --lr --beta1 --beta2 --eps --weight-decay, decay on
                         tensors of rank >= 2; --attention explicit|sdpa|auto):
                         see launch/ddp_tools/torch_ref/torch_reference_gpt.py. The line adds
                         tokens_per_s (samples are windows of T tokens).

Precision (--precision; torch_precision.py), as a practitioner would run it:
  fp16, cuda: torch.autocast(float16) + GradScaler (init scale 65536, growth
        interval 2000: ours' defaults in launch/options.cpp), FP32 weights.
  fp16, cpu:  plain FP32. autocast on CPU means bfloat16 (or slow float16
        paths), which is not a fair peer to our FP16 storage with FP32 GEMMs.
  bf16 (the peer of ours --precision bf16), on either device:
        torch.autocast(dtype=torch.bfloat16), FP32 weights, no GradScaler.

  --mode eager|compile   compile: torch.compile of the forward + loss (the
                         backward comes compiled with it; SGD and GradScaler
                         stay eager); when it is not available or fails, one
                         JSON line with "error" and exit status 0, so a table
                         can say n/a.
  --ranks N              cpu only: DistributedDataParallel over gloo, N
                         processes on localhost (torch.multiprocessing spawn);
                         --batch-size is per rank, as ours.
  --threads T            torch's own threads per rank (default cores / N):
                         torch.set_num_threads and OMP_NUM_THREADS (torch's
                         OpenMP intra-op pool), set before torch is imported.
  --blas-threads B       OpenBLAS's pool per rank (default: T), through
                         OPENBLAS_NUM_THREADS before the import: Debian's
                         torch sends FP32 GEMMs (Linear's addmm) to OpenBLAS's
                         sgemm, whose pthreads pool is sized at load time from
                         that variable and which set_num_threads does not
                         govern. So --threads 1 --blas-threads C runs the
                         element-wise work on one thread and the GEMMs on C
                         (compare_torch.py tries both; the JSON line says what
                         the loaded BLAS reports, "blas").
                         OMP_WAIT_POLICY=PASSIVE too (unless set): torch's
                         idle OpenMP threads otherwise spin on the cores that
                         OpenBLAS's threads need (seen on 2 cores: model a at
                         188 ms per step with 2+2 threads, 67 ms passive).

Usage: python3 launch/torch_reference.py --layers 784,1024,1024,10 --batch-size 256 --device cpu
       python3 launch/torch_reference.py --model gpt --n-layer 4 --n-head 4 --n-embd 128 \
           --block-size 128 --vocab-size 256 --batch-size 16 --lr 2e-3 --weight-decay 0.1 --device cpu
"""
import argparse
import json
import os
import statistics
import sys
import time
import types

from ddp_tools.torch_ref import torch_precision, torch_reference_gpt

# H100 and H200 (SXM) dense FP16/BF16 Tensor Core peak, TFLOP/s, without
# sparsity (vendor datasheet). MFU is reported against it; null elsewhere.
PEAK_TFLOPS_BY_NAME = {"H100": 989.0, "H200": 989.0}

# Our defaults (launch/options.cpp): lr, momentum, loss scaler.
LR, MOMENTUM = 0.05, 0.9
GPT_LR = 2e-3  # launch/train_lm.sh's; the step time does not depend on it
INIT_SCALE, GROWTH_FACTOR, BACKOFF_FACTOR, GROWTH_INTERVAL = 65536.0, 2.0, 0.5, 2000

# One resident batch, as ours (`ddp_train --bench`), so both sides time the
# same thing.
DATA_BATCHES = 1


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["mlp", "gpt"], default="mlp")
    p.add_argument("--layers", default="784,1024,1024,10", help="--model mlp: widths: input,hidden...,output")
    p.add_argument("--batch-size", type=int, default=256, help="samples (GPT: windows) per step per rank")
    p.add_argument("--lr", type=float, default=None,
                   help=f"learning rate (default: SGD's {LR} for the MLP, AdamW's {GPT_LR} for the GPT)")
    p.add_argument("--loss", choices=["xent", "mse"], default="xent")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--ranks", type=int, default=1, help="processes (cpu only; DDP over gloo when > 1)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads and OMP_NUM_THREADS per rank (0: cores / ranks)")
    p.add_argument("--blas-threads", type=int, default=0,
                   help="OPENBLAS_NUM_THREADS per rank (0: the same as --threads)")
    p.add_argument("--bench-warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--bench-steps", type=int, default=100, help="timed steps")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="peak per device for MFU (0: 989 for H100/H200 names, else unknown)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", choices=["fp16", "bf16"], default="fp16",
                   help="fp16: autocast float16 + GradScaler on CUDA, FP32 on CPU; bf16: autocast bfloat16, no scaler")
    torch_reference_gpt.add_arguments(p)
    a = p.parse_args(argv)
    if a.model == "gpt":
        torch_reference_gpt.check_arguments(p, a)
    if a.lr is None:
        a.lr = GPT_LR if a.model == "gpt" else LR
    a.widths = [int(w) for w in a.layers.split(",")]
    if len(a.widths) < 2 or min(a.widths) <= 0:
        p.error("--layers needs at least two positive widths")
    if a.batch_size <= 0 or a.bench_steps <= 0 or a.bench_warmup < 0 or a.ranks <= 0:
        p.error("--batch-size, --bench-steps and --ranks must be positive, --bench-warmup >= 0")
    if a.device == "cuda" and a.ranks != 1:
        p.error("--ranks > 1 is for --device cpu (one GPU here)")
    if a.threads <= 0:
        a.threads = max(1, (os.cpu_count() or 1) // a.ranks)
    if a.blas_threads <= 0:
        a.blas_threads = a.threads
    return a


def model_flops_per_step(widths, batch):
    """Forward 2*B*in*out, backward dX and dW 2*B*in*out each, per layer;
    the first layer needs no dX."""
    macs = sum(i * o for i, o in zip(widths[:-1], widths[1:]))
    return 6 * batch * macs - 2 * batch * widths[0] * widths[1]


def percentile(sorted_values, q):
    """Linear interpolation between the closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q / 100.0 * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def emit(obj):
    print(json.dumps(obj), flush=True)


def blas_info():
    """What the BLAS loaded into this process says of itself: its file and,
    for OpenBLAS, its threading (pthreads, OpenMP or none) and pool size, as
    read after torch.set_num_threads. The proof that --blas-threads reached
    the GEMMs' pool, rather than an assumption; {} where it cannot tell."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            names = ((line.split()[-1], line.rsplit("/", 1)[-1].strip().lower()) for line in f)
            paths = {path for path, name in names if "blas" in name and "cublas" not in name}  # CPU BLAS only
    except OSError:
        return {}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle, nothing new runs
        except OSError:
            continue
        if not hasattr(lib, "openblas_get_num_threads"):
            continue
        # libblas.so.3 is Debian's alternatives link: its real directory names the variant.
        real = os.path.realpath(path)
        info = {"library": os.path.join(os.path.basename(os.path.dirname(real)), os.path.basename(real)),
                "threads": lib.openblas_get_num_threads()}
        if hasattr(lib, "openblas_get_config"):
            lib.openblas_get_config.restype = ctypes.c_char_p
            info["config"] = (lib.openblas_get_config() or b"").decode(errors="replace").strip()
        if hasattr(lib, "openblas_get_parallel"):  # 0 sequential, 1 pthreads, 2 OpenMP
            info["parallel"] = {0: "sequential", 1: "pthreads", 2: "openmp"}.get(
                lib.openblas_get_parallel(), "unknown")
        return info
    return {"library": ", ".join(sorted(os.path.basename(p) for p in paths))} if paths else {}


def build_model(torch, widths):
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_grad_scaler(torch):
    # torch >= 2.3 has torch.amp.GradScaler("cuda"); older ones torch.cuda.amp.
    kwargs = dict(init_scale=INIT_SCALE, growth_factor=GROWTH_FACTOR,
                  backoff_factor=BACKOFF_FACTOR, growth_interval=GROWTH_INTERVAL)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", **kwargs)
    return torch.cuda.amp.GradScaler(**kwargs)


def mlp_workload(torch, args, device, rank, world):
    """The MLP: a namespace of what run_rank times (model, opt, batches
    [(x, y)], forward_loss(x, y), flops_per_step of one rank's batch,
    tokens_per_sample (0: not token data), name, extra JSON fields)."""
    torch.manual_seed(args.seed)  # same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = build_model(torch, args.widths).to(device)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=MOMENTUM)

    # Synthetic data resident on the device, drawn per rank.
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1 + rank)
    b, n_in, n_out = args.batch_size, args.widths[0], args.widths[-1]
    xs = [torch.randn(b, n_in, generator=gen).to(device) for _ in range(DATA_BATCHES)]
    if args.loss == "xent":
        ys = [torch.randint(0, n_out, (b,), generator=gen).to(device) for _ in range(DATA_BATCHES)]
        loss_fn = torch.nn.functional.cross_entropy
    else:
        ys = [torch.randn(b, n_out, generator=gen).to(device) for _ in range(DATA_BATCHES)]
        loss_fn = torch.nn.functional.mse_loss

    autocast = torch_precision.autocast_dtype(torch, args.precision, device)

    def forward_loss(x, y):
        if autocast is not None:
            with torch.autocast(device_type=device.type, dtype=autocast):
                out = model(x)
            return loss_fn(out.float(), y)  # FP32 loss (autocast would pick FP32 for it too)
        return loss_fn(model(x), y)

    return types.SimpleNamespace(model=model, opt=opt, batches=list(zip(xs, ys)), forward_loss=forward_loss,
                                 flops_per_step=model_flops_per_step(args.widths, b), tokens_per_sample=0,
                                 name="-".join(str(w) for w in args.widths), extra={"loss": args.loss})


def run_rank(rank, args, port):
    """One rank's benchmark; rank 0 prints the JSON line. Returns nothing."""
    import torch  # imported here: the environment's thread variables are set by now

    torch.set_num_threads(args.threads)
    world = args.ranks
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

    device = torch.device(args.device)
    on_cuda = args.device == "cuda"

    make = torch_reference_gpt.build if args.model == "gpt" else mlp_workload
    work = make(torch, args, device, rank, world)
    opt, forward_loss, batches = work.opt, work.forward_loss, work.batches

    if args.mode == "compile":
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch.compile is not available in torch {torch.__version__}")
        forward_loss = torch.compile(forward_loss)

    scaler = make_grad_scaler(torch) if torch_precision.uses_grad_scaler(args.precision, on_cuda) else None

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(x, y)
        if scaler is not None:
            # GradScaler.step reads the inf flag on the host (one sync per
            # step): that is how PyTorch users run FP16 training.
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    compile_s = None
    t0 = time.perf_counter()
    for i in range(args.bench_warmup):
        step(i)
        if i == 0 and on_cuda:
            torch.cuda.synchronize()
        if i == 0:
            compile_s = time.perf_counter() - t0  # first step: compilation in compile mode
    if on_cuda:
        torch.cuda.synchronize()
    if world > 1:
        torch.distributed.barrier()

    step_ms = []
    if on_cuda:
        # One event pair per step, read after the loop: no extra host sync
        # inside the timed region.
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(args.bench_steps)]
        t_start = time.perf_counter()
        for i, (start, end) in enumerate(events):
            start.record()
            step(args.bench_warmup + i)
            end.record()
        torch.cuda.synchronize()
        total_s = time.perf_counter() - t_start
        step_ms = [s.elapsed_time(e) for s, e in events]
    else:
        t_start = time.perf_counter()
        for i in range(args.bench_steps):
            t = time.perf_counter()
            step(args.bench_warmup + i)
            step_ms.append((time.perf_counter() - t) * 1e3)
        total_s = time.perf_counter() - t_start

    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    if rank != 0:
        return

    s = sorted(step_ms)
    median_ms = statistics.median(s)
    b = args.batch_size
    global_batch = b * world
    flops = work.flops_per_step * world
    model_tflops = flops / (median_ms * 1e-3) / 1e12
    device_name = torch.cuda.get_device_name() if on_cuda else "cpu"
    peak = args.peak_tflops
    if peak <= 0 and on_cuda:
        peak = next((v for k, v in PEAK_TFLOPS_BY_NAME.items() if k in device_name), 0.0)
    line = {
        "event": "bench",
        "peer": "pytorch",
        "mode": args.mode,
        "model": work.name,
        "device": args.device,
        "device_name": device_name,
        "world_size": world,
        "batch_per_rank": b,
        "global_batch": global_batch,
        # From the median step, as ours; total_s/steps gives the mean.
        "samples_per_s": global_batch / (median_ms * 1e-3),
        "samples_per_s_mean": global_batch * args.bench_steps / total_s,
        **({"tokens_per_s": global_batch * work.tokens_per_sample / (median_ms * 1e-3)}
           if work.tokens_per_sample else {}),
        "step_ms_median": median_ms,
        "step_ms_p10": percentile(s, 10),
        "step_ms_p90": percentile(s, 90),
        "model_tflops": model_tflops,
        "mfu": model_tflops / (peak * world) if peak > 0 else None,
        "peak_tflops": peak if peak > 0 else None,
        "allreduce_ms_per_step": None,  # not measured on the PyTorch side
        "allreduce_hidden_fraction": None,
        "precision": torch_precision.label(args.precision, on_cuda),
        "warmup_steps": args.bench_warmup,
        "timed_steps": args.bench_steps,
        "first_step_s": compile_s,
        "threads_per_rank": args.threads,
        "blas_threads_per_rank": args.blas_threads,
        "torch_num_threads": torch.get_num_threads(),
        "blas": blas_info(),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "torch": torch.__version__,
    }
    line.update(work.extra)
    emit(line)


def spawned_rank(rank, args, port):
    try:
        run_rank(rank, args, port)
    except Exception as e:  # rank 0 reports; the others' tracebacks go to stderr
        if rank == 0:
            error_line(args, e)
        raise


def error_line(args, e):
    emit({"event": "bench", "peer": "pytorch", "mode": args.mode, "device": args.device,
          "model": torch_reference_gpt.model_name(args) if args.model == "gpt" else "-".join(str(w) for w in args.widths),
          "world_size": args.ranks,
          "batch_per_rank": args.batch_size, "error": f"{type(e).__name__}: {e}"[:2000]})


def main():
    args = parse_args()
    # Before `import torch`: OpenBLAS and OpenMP size their pools at load time.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    print(f"torch_reference: threads per rank: torch.set_num_threads({args.threads}), "
          f"OMP_NUM_THREADS={args.threads}, OPENBLAS_NUM_THREADS={args.blas_threads}, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; ranks {args.ranks}",
          file=sys.stderr, flush=True)
    if args.ranks == 1:
        try:
            run_rank(0, args, None)
        except Exception as e:
            error_line(args, e)
            # A compile failure is a result ("n/a"), anything else a failure.
            return 0 if args.mode == "compile" else 1
        return 0

    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        mp.spawn(spawned_rank, args=(args, port), nprocs=args.ranks, join=True)
    except Exception as e:
        print(f"torch_reference: {type(e).__name__}: {e}", file=sys.stderr)
        return 0 if args.mode == "compile" else 1
    return 0


def cli():
    return main()


if __name__ == "__main__":
    sys.exit(cli())
