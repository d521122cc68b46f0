"""torch_gpt.py: the GPT of `ddp_train --model gpt` in PyTorch: nanoGPT's `GPT`
(GPT-2 architecture), written here, with our tensor names and padded vocabulary.

The module: learned token (wte [Vp, C]) and position (wpe [block_size, C])
embeddings; n_layer pre-LayerNorm blocks x = x + attn(ln_1(x)),
x = x + mlp(ln_2(x)); causal multi-head attention with one fused c_attn
(q, k, v = columns 0..C-1, C..2C-1, 2C..3C-1) scaled by 1/sqrt(head size)
before the mask; an MLP of width 4C with GELU approximate='tanh'; LayerNorm
eps 1e-5 with bias; a final ln_f; logits = ln_f(x) wte^T (the head tied to
wte) over Vp >= V columns, of which the first V are the classes: the loss is
the mean cross-entropy over logits[..., :V] only ("padded classes never win").
No dropout. Initialisation as nanoGPT: N(0, 0.02), residual projections
(c_proj) N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm gain 1.

Its state_dict is exactly our tensor names (transformer.wte.weight, ...,
transformer.ln_f.bias), nn.Linear layout. There is no lm_head module: the
head is F.linear(x, wte.weight), so the tied weight is stored once and
`ddp_train --save-weights x.safetensors` loads strictly. A nanoGPT
state_dict loads too: its lm_head.weight (must equal wte) and its attention
mask buffers (*.attn.bias) are dropped first.

  python3 launch/torch_gpt.py --self-test
      float64, tiny config (2 layers, 2 heads, C 32, T 16, V 60 of Vp 64):
      autograd gradients against central finite differences of the module's
      own loss on random elements of every tensor, the padded rows' gradient
      0, a safetensors round trip loaded strictly; prints the loss. Exit 0/1.
  python3 launch/torch_gpt.py --dump DIR [--seed S] [--init wide|nanogpt]
      the same tiny config's weights, batch, loss, logits and gradients in
      float64, for C++ tests (tests/test_gpt_reference_vs_torch.cpp): see
      dump() for the files. DIR must not exist or be empty.
  python3 launch/torch_gpt.py --load FILE --n-head H [--vocab V]
      loads a safetensors file strictly and prints its configuration.

Exits 77 (ctest's SKIP_RETURN_CODE) when torch, numpy or safetensors is
missing; /usr/bin/python3 has them after launch/install_bench_deps.sh.
"""
import argparse
import dataclasses
import json
import math
import os
import sys

SKIP = 77
try:
    import numpy as np
    import safetensors.torch
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    if __name__ == "__main__":
        print(f"SKIP: {e} (launch/install_bench_deps.sh installs torch for /usr/bin/python3)")
        sys.exit(SKIP)
    raise


@dataclasses.dataclass
class GPTConfig:
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    block_size: int = 16
    vocab_size: int = 60          # V: the real classes
    padded_vocab_size: int = 64   # Vp >= V: rows of wte, columns of the logits

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if not 1 <= self.vocab_size <= self.padded_vocab_size:
            raise ValueError(f"vocab_size {self.vocab_size} outside [1, padded_vocab_size {self.padded_vocab_size}]")


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        # The explicit form of nanoGPT's slow path (not scaled_dot_product_attention),
        # so float64 and double backward work on every torch version.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=1e-5)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, eps=1e-5),
        ))
        self.init_nanogpt()

    def init_nanogpt(self, generator=None):
        """nanoGPT's _init_weights and the scaled residual projections."""
        std_proj = 0.02 / math.sqrt(2 * self.config.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                    p.fill_(1.0)
                elif name.endswith(".bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, std_proj if name.endswith("c_proj.weight") else 0.02, generator=generator)

    def forward(self, idx, targets=None):
        """idx, targets: (B, T) int64. Returns logits (B, T, Vp) and the loss (or None)."""
        B, T = idx.size()
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} above block_size {self.config.block_size}")
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = F.linear(self.transformer.ln_f(x), self.transformer.wte.weight)  # tied head
        loss = None
        if targets is not None:
            V = self.config.vocab_size
            loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
        return logits, loss


def config_from_state_dict(sd, n_head, vocab_size=None):
    """The configuration a state_dict's shapes imply (n_head cannot be read off them)."""
    n_layer = len({k.split(".")[2] for k in sd if k.startswith("transformer.h.")})
    Vp, C = sd["transformer.wte.weight"].shape
    return GPTConfig(n_layer=n_layer, n_head=n_head, n_embd=C, block_size=sd["transformer.wpe.weight"].shape[0],
                     vocab_size=vocab_size or Vp, padded_vocab_size=Vp)


def read_state_dict(path):
    """A safetensors file's tensors under our names: nanoGPT's extra entries
    (lm_head.weight, tied to wte; the *.attn.bias mask buffers) dropped."""
    sd = safetensors.torch.load_file(path)
    head = sd.pop("lm_head.weight", None)
    if head is not None and not torch.equal(head, sd.get("transformer.wte.weight", head)):
        raise ValueError(f"{path}: lm_head.weight differs from transformer.wte.weight (the head is tied)")
    return {k: v for k, v in sd.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))}


def load_safetensors(model, path):
    """Loads strictly (every tensor, nothing extra, same shapes), cast to the model's dtype."""
    sd = read_state_dict(path)
    own = model.state_dict()
    missing, extra = sorted(set(own) - set(sd)), sorted(set(sd) - set(own))
    if missing or extra:
        raise ValueError(f"{path}: missing tensors {missing}, unexpected tensors {extra}")
    for k, v in sd.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise ValueError(f"{path}: {k} has shape {tuple(v.shape)}, expected {tuple(own[k].shape)}")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in sd.items()}, strict=True)


def _safetensors_dict(model, dtype):
    return {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}


def save_safetensors(model, path, dtype=torch.float32):
    safetensors.torch.save_file(_safetensors_dict(model, dtype), path)


def safetensors_bytes(model, dtype=torch.float32):
    """What save_safetensors writes, for a caller that writes it itself (tool_files.write_atomic)."""
    return safetensors.torch.save(_safetensors_dict(model, dtype))


def init_wide(model, generator):
    """Wider than nanoGPT's 0.02 (whose near-uniform attention leaves the q/k
    gradients at ~1e-6, below what finite differences resolve): linear
    weights N(0, 1/fan_in), embeddings N(0, 0.3^2), biases N(0, 0.1^2),
    LayerNorm gains 1 + N(0, 0.3^2). The same rule as test_gpt_reference.cpp."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype)
            if ".ln_" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.3 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif ".wte." in name or ".wpe." in name:
                p.copy_(0.3 * noise)
            else:
                p.copy_(noise / math.sqrt(p.shape[1]))


def tiny_model(seed, init="wide"):
    """The tests' tiny model in float64, its weights and a batch (B 2, T 16) from `seed`."""
    cfg = GPTConfig()
    g = torch.Generator().manual_seed(seed)
    model = GPT(cfg).double()
    if init == "wide":
        init_wide(model, g)
    else:
        model.init_nanogpt(g)
    tokens = torch.randint(0, cfg.vocab_size, (2, cfg.block_size), generator=g)
    targets = torch.randint(0, cfg.vocab_size, (2, cfg.block_size), generator=g)
    return model, tokens, targets


def gradients(model, tokens, targets):
    model.zero_grad(set_to_none=True)
    logits, loss = model(tokens, targets)
    loss.backward()
    return logits.detach(), loss.item(), {k: p.grad.detach().clone() for k, p in model.named_parameters()}


def self_test(seed):
    import tempfile
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    model, tokens, targets = tiny_model(seed)
    cfg = model.config
    _, loss, grads = gradients(model, tokens, targets)
    print(f"seed {seed}: loss {loss:.17g} (tiny config {dataclasses.asdict(cfg)}, float64)")
    check(sorted(grads) == sorted(model.state_dict()), "a gradient for every state_dict tensor, no lm_head entry")

    # Central differences, h 1e-5: ~1e-10 absolute error here (truncation and
    # rounding; 1e-9 at h 1e-6), so the error is relative to max(|grad|, 1e-3)
    # (as test_gpt_reference.cpp).
    h, floor, worst = 1e-5, 1e-3, 0.0
    g = torch.Generator().manual_seed(seed + 1)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, p in params.items():
            flat = p.view(-1)
            for i in torch.randint(0, flat.numel(), (4,), generator=g).tolist():
                saved = flat[i].item()
                flat[i] = saved + h
                up = model(tokens, targets)[1].item()
                flat[i] = saved - h
                down = model(tokens, targets)[1].item()
                flat[i] = saved
                numeric, analytic = (up - down) / (2 * h), grads[name].view(-1)[i].item()
                rel = abs(numeric - analytic) / max(abs(analytic), floor)
                worst = max(worst, rel)
                if rel >= 1e-6:
                    check(False, f"{name}[{i}]: autograd {analytic:.12g}, finite difference {numeric:.12g}")
    check(worst < 1e-6, f"autograd against finite differences on every tensor: worst relative error {worst:.3g}")
    V = cfg.vocab_size
    check(bool(torch.all(grads["transformer.wte.weight"][V:] == 0)), "padded wte rows get no gradient")

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.safetensors")
        save_safetensors(model, path, torch.float64)
        fresh = GPT(cfg).double()
        load_safetensors(fresh, path)
        same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
        check(same, "float64 safetensors round trip, loaded strictly")
        # A nanoGPT-shaped file (lm_head.weight and mask buffers) loads into float32.
        sd = {k: v.float().contiguous() for k, v in model.state_dict().items()}
        sd["lm_head.weight"] = sd["transformer.wte.weight"].clone()
        sd["transformer.h.0.attn.bias"] = torch.ones(1, 1, cfg.block_size, cfg.block_size).tril()
        safetensors.torch.save_file(sd, path)
        fresh = GPT(cfg)
        load_safetensors(fresh, path)
        check(torch.equal(fresh.transformer.wte.weight, sd["transformer.wte.weight"]), "nanoGPT-shaped file loads")
        del sd["transformer.ln_f.bias"]
        safetensors.torch.save_file(sd, path)
        try:
            load_safetensors(fresh, path)
            check(False, "a file without transformer.ln_f.bias is refused")
        except ValueError as e:
            check("transformer.ln_f.bias" in str(e), f"a file without transformer.ln_f.bias is refused: {e}")
    return 1 if failures else 0


def dump(directory, seed, init):
    """Writes, all float64 unless said:
    config.json                 the GPTConfig, batch/seq, seed, init, loss (repr)
    weights.safetensors         every tensor, F64, our names
    weights/<name>.npy          the same, one '<f8' file per tensor
    grads/<name>.npy            d loss / d tensor ('<f8'; wte's includes the tied head's part)
    tokens.npy, targets.npy     (B, T) '<i4'
    loss.npy                    (1,) '<f8'
    logits.npy                  (B*T, Vp) '<f8', padded columns included"""
    if os.path.exists(directory) and os.listdir(directory):
        raise ValueError(f"{directory}: exists and is not empty")
    model, tokens, targets = tiny_model(seed, init)
    logits, loss, grads = gradients(model, tokens, targets)
    for sub in ("weights", "grads"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(sd, os.path.join(directory, "weights.safetensors"))
    for name, t in sd.items():
        np.save(os.path.join(directory, "weights", name + ".npy"), t.numpy().astype("<f8"))
        np.save(os.path.join(directory, "grads", name + ".npy"), grads[name].numpy().astype("<f8"))
    np.save(os.path.join(directory, "tokens.npy"), tokens.numpy().astype("<i4"))
    np.save(os.path.join(directory, "targets.npy"), targets.numpy().astype("<i4"))
    np.save(os.path.join(directory, "loss.npy"), np.array([loss], dtype="<f8"))
    flat_logits = logits.reshape(-1, model.config.padded_vocab_size)  # (B*T, Vp)
    np.save(os.path.join(directory, "logits.npy"), flat_logits.numpy().astype("<f8"))
    meta = dict(dataclasses.asdict(model.config), batch=tokens.shape[0], seq=tokens.shape[1], seed=seed, init=init,
                loss=repr(loss), tensors=list(sd))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"wrote {directory}: {len(sd)} tensors, loss {loss:.17g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--self-test", action="store_true")
    mode.add_argument("--dump", metavar="DIR")
    mode.add_argument("--load", metavar="FILE")
    ap.add_argument("--seed", type=int, default=None, help="default: fresh from os.urandom, printed")
    ap.add_argument("--init", choices=["wide", "nanogpt"], default="wide")
    ap.add_argument("--n-head", type=int, help="with --load")
    ap.add_argument("--vocab", type=int, help="with --load: the real vocabulary V (default: wte's rows)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    torch.set_num_threads(1)  # tiny tensors: threads only add noise
    try:
        if args.self_test:
            return self_test(seed)
        if args.dump:
            dump(args.dump, seed, args.init)
            return 0
        if not args.n_head:
            raise ValueError("--load needs --n-head")
        cfg = config_from_state_dict(read_state_dict(args.load), args.n_head, args.vocab)
        model = GPT(cfg)
        load_safetensors(model, args.load)
        n = sum(p.numel() for p in model.parameters())
        print(f"{args.load}: loaded strictly, {dataclasses.asdict(cfg)}, {n} parameters")
        return 0
    except (ValueError, OSError, KeyError, safetensors.SafetensorError) as e:
        print(f"torch_gpt.py: error: {e}", file=sys.stderr)
        return 1


def cli():
    return main()


if __name__ == "__main__":
    sys.exit(cli())
