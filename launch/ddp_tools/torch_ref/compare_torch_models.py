"""compare_torch_models.py: the reference models of compare_torch.py (its
docstring says what each is), their steps per device, and the optimizer and
peak figures both sides are given."""

# name -> layers, loss, batch per rank by device (MLPs); GPTs: their shape
# ("gpt"), batch in windows per rank by device, and the devices they run on.
MODELS = {
    "a": {"layers": "784,1024,1024,10", "loss": "xent", "batch": {"cuda": 256, "cpu": 256}},
    "b": {"layers": "10,10", "loss": "mse", "batch": {"cuda": 64, "cpu": 64}},
    "c": {"layers": "4096,4096,4096,4096,4096", "loss": "mse", "batch": {"cuda": 4096, "cpu": 256}},
    "g": {"gpt": {"n-layer": 4, "n-head": 4, "n-embd": 128, "block-size": 128, "vocab-size": 256},
          "batch": {"cuda": 16, "cpu": 16}},
    "gpt2": {"gpt": {"n-layer": 12, "n-head": 12, "n-embd": 768, "block-size": 1024, "vocab-size": 50304},
             "batch": {"cuda": 8}},
}
# Both sides' optimizer for the GPT rows (launch/train_lm.sh's; the step
# time does not depend on the values).
GPT_ADAMW = {"lr": "2e-3", "weight-decay": "0.1", "beta1": "0.9", "beta2": "0.999", "eps": "1e-8"}
# (warm-up, timed) steps per model and device: each run a few seconds at most
# (CPU: 2 cores at ~100 GFLOP/s; GPU: an H200, where a and b are bound by
# launches and c by the Tensor Cores at ~1.5 TFLOP per step).
STEPS = {
    ("a", "cpu"): (3, 30), ("b", "cpu"): (50, 1000), ("c", "cpu"): (1, 5),
    ("a", "cuda"): (50, 500), ("b", "cuda"): (100, 2000), ("c", "cuda"): (10, 100),
    # g: ~0.3 s per step on 2 cores; gpt2: ~7 TFLOP per step (0.87 GFLOP per
    # token x 8 x 1024 tokens), a few tens of ms on an H200.
    ("g", "cpu"): (2, 10), ("g", "cuda"): (20, 200), ("gpt2", "cuda"): (5, 30),
}
# Dense FP16 Tensor Core peak per GPU, TFLOP/s (datasheet, no sparsity).
PEAK_TFLOPS_BY_NAME = {"H100": 989.0, "H200": 989.0}
