"""ddp_tools.traces: merge_traces, the ranks' --trace files merged into one Chrome trace."""
