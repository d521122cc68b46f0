"""ddp_tools.sweeps: ddp_train run over a grid of points and tabulated: scaling_sweep (its
Slurm jobs: sweep_slurm) and zero_table."""
