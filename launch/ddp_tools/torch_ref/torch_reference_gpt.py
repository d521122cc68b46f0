"""torch_reference_gpt.py: the GPT workload of torch_reference.py --model gpt,
the PyTorch peer of `ddp_train --bench --model gpt`.

The model is torch_gpt.py's GPT (nanoGPT's GPT-2 architecture with our tensor
names; imported, not copied), of the shape the flags give (--n-layer,
--n-head, --n-embd, --block-size, --vocab-size; no padded classes: random
tokens use the whole vocabulary, as ours' bench windows do). Data: one
resident batch of B windows of T uniform random token ids in [0, V), the
targets the same stream shifted by one, as ours. Optimizer: torch.optim.AdamW
with ours' flags (--lr, --beta1, --beta2, --eps, --weight-decay) and
nanoGPT's groups as ours marks its tensors (gpt_config.h): decay on tensors
of rank >= 2 only (gpt_equivalence.py's decay_groups). On CUDA AdamW is
fused (fused=True), as nanoGPT runs it there: PyTorch's fastest AdamW.

Attention (--attention):
  explicit  torch_gpt.py's own form: q k^T, scale, mask, softmax, @ v
            (materialises the T x T scores per head).
  sdpa      F.scaled_dot_product_attention(q, k, v, is_causal=True) on the
            same c_attn/c_proj weights: on CUDA under autocast float16 it
            is the flash-attention kernel, PyTorch's best configuration, and
            the default there.
  auto      CUDA: sdpa. CPU: both forms are timed on this batch (1 untimed
            and 3 timed forward+backward passes each, before the warm-up)
            and the faster runs; the JSON line gives both figures
            ("attention_probe_ms") and the choice. torch before 2.0 has no
            scaled_dot_product_attention: explicit only. Measured on the
            development machine (2 shared cores at load average ~4,
            Debian's torch 1.13.0, the README model 4/4/128, T 128, V 256,
            batch 16, 2 threads): explicit 2,700-3,150 tokens/s (650-750 ms
            per step); SDPA could not be timed there (torch 1.13 lacks it),
            so the probe is what chooses on a machine whose torch has both,
            and its figures are in every JSON line.

FLOPs per token: ours' count (gpt_config.h gpt_flops_per_token): 6 x
(parameters less the position table) + 6 x 2 x n_layer x T x C for
attention, so that both sides' MFU and TFLOP/s use one formula.
"""
import time
import types


def flops_per_token(n_layer, n_embd, block_size, vocab_size):
    """gpt_config.cpp's gpt_flops_per_token, the same arithmetic."""
    c = float(n_embd)
    params_no_wpe = n_layer * (12 * c * c + 13 * c) + 2 * c + vocab_size * c
    return 6.0 * params_no_wpe + 12.0 * n_layer * block_size * c


def add_arguments(p):
    g = p.add_argument_group("--model gpt")
    g.add_argument("--n-layer", type=int, default=4)
    g.add_argument("--n-head", type=int, default=4)
    g.add_argument("--n-embd", type=int, default=128)
    g.add_argument("--block-size", type=int, default=128, help="T: tokens per window")
    g.add_argument("--vocab-size", type=int, default=256, help="V: token ids uniform in [0, V)")
    g.add_argument("--attention", choices=["auto", "explicit", "sdpa"], default="auto")
    g.add_argument("--beta1", type=float, default=0.9)
    g.add_argument("--beta2", type=float, default=0.999)
    g.add_argument("--eps", type=float, default=1e-8)
    g.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's, on tensors of rank >= 2")


def check_arguments(p, a):
    if min(a.n_layer, a.n_head, a.n_embd, a.block_size, a.vocab_size) <= 0:
        p.error("--n-layer, --n-head, --n-embd, --block-size and --vocab-size must be positive")
    if a.n_embd % a.n_head:
        p.error(f"--n-embd {a.n_embd} does not divide by --n-head {a.n_head}")


def model_name(a):
    """Ours' model text (model_catalog.cpp model_shape_text)."""
    return f"gpt-l{a.n_layer}-h{a.n_head}-c{a.n_embd}-t{a.block_size}-v{a.vocab_size}"


def sdpa_attention_class(torch_gpt, F):
    """torch_gpt's CausalSelfAttention with scaled_dot_product_attention:
    the same parameters (c_attn, c_proj), so a module's class can be swapped
    in place and its state_dict stays the same."""

    class SdpaCausalSelfAttention(torch_gpt.CausalSelfAttention):
        def forward(self, x):
            B, T, C = x.size()
            hs = C // self.n_head
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(hs) by default
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    return SdpaCausalSelfAttention


def set_attention(model, form, torch_gpt, F):
    cls = sdpa_attention_class(torch_gpt, F) if form == "sdpa" else torch_gpt.CausalSelfAttention
    for block in model.transformer.h:
        block.attn.__class__ = cls


def decay_groups(model, weight_decay):
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def build(torch, args, device, rank, world):
    """The GPT workload, in torch_reference.run_rank's form (see its
    mlp_workload); on CUDA the forward runs under autocast float16 (the loss
    comes out FP32: autocast runs cross_entropy in FP32)."""
    import torch.nn.functional as F
    from ddp_tools.torch_ref import torch_gpt

    cfg = torch_gpt.GPTConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                              block_size=args.block_size, vocab_size=args.vocab_size,
                              padded_vocab_size=args.vocab_size)
    torch.manual_seed(args.seed)  # nanoGPT's initialisation, the same on every rank
    model = torch_gpt.GPT(cfg).to(device)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1 + rank)
    b, t = args.batch_size, args.block_size
    stream = torch.randint(0, args.vocab_size, (b, t + 1), generator=gen)
    x, y = stream[:, :t].contiguous().to(device), stream[:, 1:].contiguous().to(device)

    w = types.SimpleNamespace()
    w.extra = {"vocab_size": args.vocab_size, "block_size": t}
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    form = args.attention
    if form == "sdpa" and not have_sdpa:
        raise RuntimeError(f"--attention sdpa: torch {torch.__version__} has no scaled_dot_product_attention")
    if form == "auto":
        if not have_sdpa:
            form = "explicit"
            w.extra["attention_probe_ms"] = {"sdpa": None, "why": f"torch {torch.__version__} has no SDPA"}
        elif device.type == "cuda":
            form = "sdpa"
        else:
            probe = {f: probe_ms(torch, model, x, y, f, torch_gpt, F) for f in ("explicit", "sdpa")}
            form = min(probe, key=probe.get)
            w.extra["attention_probe_ms"] = probe
    set_attention(model, form, torch_gpt, F)
    w.extra["attention"] = form

    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    kwargs = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    if device.type == "cuda":
        kwargs["fused"] = True
    w.opt = torch.optim.AdamW(decay_groups(model, args.weight_decay), **kwargs)
    w.extra["optimizer"] = "AdamW" + (" fused" if kwargs.get("fused") else "")

    from ddp_tools.torch_ref import torch_precision
    autocast = torch_precision.autocast_dtype(torch, args.precision, device)

    def forward_loss(inputs, targets):
        if autocast is not None:
            with torch.autocast(device_type=device.type, dtype=autocast):
                return model(inputs, targets)[1]
        return model(inputs, targets)[1]

    w.model, w.batches, w.forward_loss = model, [(x, y)], forward_loss
    w.tokens_per_sample = t
    w.flops_per_step = flops_per_token(args.n_layer, args.n_embd, t, args.vocab_size) * t * b
    w.name = model_name(args)
    return w


def probe_ms(torch, model, x, y, form, torch_gpt, F, timed=3):
    """Median ms of a forward+backward pass with attention `form` (CPU)."""
    set_attention(model, form, torch_gpt, F)
    times = []
    for i in range(1 + timed):
        start = time.perf_counter()
        _, loss = model(x, y)
        loss.backward()
        if i:
            times.append((time.perf_counter() - start) * 1e3)
    model.zero_grad(set_to_none=True)
    return sorted(times)[len(times) // 2]
