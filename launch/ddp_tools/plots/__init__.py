"""ddp_tools.plots: PNG plots of metrics and sweeps (plot_metrics, plot_sweep), the TensorBoard
export (metrics_to_tensorboard), and what only they share (metrics_series, plot_common)."""
