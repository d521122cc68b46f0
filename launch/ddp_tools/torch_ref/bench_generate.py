"""bench_generate.py: tokens/s of `ddp_train --generate` with and without its KV cache, beside
transformers' GPT2LMHeadModel.generate (with its cache, and without) on the same model, prompt,
greedy decoding and CPU threads, in one run.

  python3 -m ddp_tools.torch_ref.bench_generate [--ddp-train build/ddp_train] [--ranks data/gpt2.tiktoken]
      [--n-layer 4 --n-head 4 --n-embd 256 --n-positions 512] [--prompt-tokens 16] [--new-tokens 200]
      [--threads 2] [--repeats 3] [--seed 1]

The model is a randomly initialised GPT2Config of GPT-2's vocabulary (50257; ours padded to 50304),
saved with save_pretrained and read by ddp_train --init-weights (tests/python/test_hf_gpt2.py checks
that the two compute the same logits). Ours: FP16 weights and activations, FP32 sums, its own timing
of the generation loop (the status line's "in S s", the weights' load and the process's start left
out: they are reported apart as the process's wall time); theirs: FP32, model.generate timed with
time.perf_counter after a warm-up call. Each figure is the median of --repeats runs. Prints a table
and whether the greedy tokens of every configuration agree (a near-tie between FP16 and FP32 logits
may split them late in a long generation; the cache never should: ours on and off are the same
arithmetic).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddp-train", default="build/ddp_train")
    p.add_argument("--ranks", default="data/gpt2.tiktoken")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--n-positions", type=int, default=512)
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def ours(args, weights, prompt, cache):
    cmd = [args.ddp_train, "--device", "cpu", "--threads", str(args.threads), "--gpt2-ranks", args.ranks, "--model",
           "gpt", "--init-weights", weights, "--generate", str(args.new_tokens), "--prompt", prompt, "--temperature",
           "0", "--kv-cache", "on" if cache else "off"]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"bench_generate: ddp_train failed: {r.stderr.decode()[-500:]}")
    m = re.search(r"generate: (\d+) tokens in ([0-9.]+) s", r.stderr.decode())
    if not m:
        raise SystemExit(f"bench_generate: no timing line in ddp_train's stderr: {r.stderr.decode()[-500:]}")
    return float(m.group(2)), wall, r.stdout


def theirs(model, ids, new_tokens, cache):
    import torch
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, use_cache=cache, pad_token_id=0)
    return time.perf_counter() - start, [int(t) for t in out[0][ids.shape[1]:]]


def main():
    args = parse_args()
    try:
        import torch
        import transformers
        import transformers.generation.utils as generation_utils
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as e:
        print(f"bench_generate: {e} (launch/install_test_deps.sh installs torch and transformers)")
        return 77
    # Debian's torch 1.13 on Python 3.11 cannot import torch.distributed.fsdp, which generate()
    # imports to ask whether the model is FSDP-managed: it is not.
    generation_utils.is_fsdp_managed_module = lambda module: False
    from ddp_tools.tokenizer import tiktoken_gpt2
    enc = tiktoken_gpt2.load_encoding(args.ranks)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = GPT2Config(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, n_positions=args.n_positions,
                     vocab_size=50257)
    model = GPT2LMHeadModel(cfg).eval()
    # A prompt of exactly --prompt-tokens tokens that survives a decode and re-encode.
    words = " ROMEO: But soft, what light through yonder window breaks? It is the east" * 8
    ids = enc.encode_ordinary(words)[:args.prompt_tokens]
    prompt = enc.decode(ids)
    ids = enc.encode_ordinary(prompt)
    if args.prompt_tokens + args.new_tokens > args.n_positions:
        raise SystemExit("bench_generate: --prompt-tokens + --new-tokens must fit --n-positions")
    with tempfile.TemporaryDirectory(prefix="bench_generate_") as tmp:
        model.save_pretrained(tmp)
        rows = []
        tokens = {}
        for cache in (True, False):
            runs = [ours(args, tmp, prompt, cache) for _ in range(args.repeats)]
            loop = statistics.median(r[0] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            tokens[f"ours cache={cache}"] = runs[0][2]
            rows.append((f"ddp_train --generate, KV cache {'on' if cache else 'off'} (FP16)", loop, wall))
        x = torch.tensor([ids])
        theirs(model, x, 4, True)  # warm-up
        for cache in (True, False):
            runs = [theirs(model, x, args.new_tokens, cache) for _ in range(args.repeats)]
            tokens[f"theirs cache={cache}"] = enc.decode_bytes(runs[0][1])
            rows.append((f"transformers generate, use_cache={cache} (FP32)", statistics.median(r[0] for r in runs),
                         None))
    print(f"model: GPT-2 shape, {args.n_layer} layers, {args.n_head} heads, {args.n_embd} wide, "
          f"{args.n_positions} positions, vocabulary 50257; prompt {len(ids)} tokens, {args.new_tokens} new tokens, "
          f"greedy; {args.threads} threads; transformers {transformers.__version__}, torch {torch.__version__}; "
          f"median of {args.repeats}")
    best = rows[0][1]
    print(f"| {'configuration':<52} | tokens/s | vs ours (cache) | process wall s |")
    print(f"|{'-' * 54}|---------:|----------------:|---------------:|")
    for name, seconds, wall in rows:
        rate = args.new_tokens / seconds
        print(f"| {name:<52} | {rate:8.1f} | {best / seconds:15.2f} | {wall if wall else float('nan'):14.2f} |")
    same = len(set(tokens.values())) == 1
    print("greedy tokens: " + ("identical in all four" if same else "differ: " +
                               "; ".join(f"{k}: {v[:40]!r}" for k, v in tokens.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
