"""torch_precision.py: the precision PyTorch's side of a comparison runs in
(torch_reference.py's --precision), as a practitioner would run it:

  fp16, CUDA: torch.autocast(float16) + GradScaler (the peer of ours' FP16
              with dynamic loss scaling);
  fp16, CPU:  plain FP32 (autocast on CPU means bfloat16, or slow float16
              paths: not a fair peer to our FP16 storage with FP32 GEMMs);
  bf16:       torch.autocast(dtype=torch.bfloat16) on either device, FP32
              weights and optimizer, no GradScaler (the peer of ours
              --precision bf16).
"""


def autocast_dtype(torch, precision, device):
    """The dtype the forward runs under autocast in, or None (plain FP32)."""
    if precision == "bf16":
        return torch.bfloat16
    return torch.float16 if device.type == "cuda" else None


def uses_grad_scaler(precision, on_cuda):
    return precision == "fp16" and on_cuda


def label(precision, on_cuda):
    if precision == "bf16":
        return "bf16 autocast"
    return "fp16 autocast + GradScaler" if on_cuda else "fp32"
