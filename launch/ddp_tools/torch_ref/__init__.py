"""ddp_tools.torch_ref: PyTorch beside ddp_train: the GPT twin (torch_gpt), the benchmark peer
(torch_reference, torch_reference_gpt), the side-by-side comparison (compare_torch,
compare_torch_models, compare_torch_table, torch_thread_configs), the GPT's activation memory by
setting beside PyTorch's speed (bench_activation_memory), our weights in PyTorch
(torch_load_weights) and the GPT's training equivalence (gpt_equivalence)."""
