"""ddp_tools.checks: bitwise_outputs, whether two runs wrote the same weights, checkpoints and metrics."""
