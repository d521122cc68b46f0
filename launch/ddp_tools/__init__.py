"""ddp_tools: ddp_train's Python tools, one package, a subpackage per family.

  common     what every family shares: tool_files (inputs bounded, outputs
             checked and written whole), output_registry (which files this
             project wrote: the one a tool may replace without --overwrite;
             shared with ddp_train), repo_paths (the checkout's root)
  traces     merge_traces: the ranks' --trace files as one Chrome trace
  scaling    the scaling model (scaling_model, its _core arithmetic and
             _inputs) and validate_scaling_model (validation_runs,
             trace_exposure)
  plots      plot_metrics, plot_sweep, metrics_to_tensorboard and what only
             they share (metrics_series, plot_common)
  sweeps     runs of ddp_train over a grid of points: scaling_sweep (its
             Slurm path: sweep_slurm) and zero_table
  tune       the Optuna search: tune, tune_space, tune_trial, tune_report
  torch_ref  PyTorch beside ddp_train: torch_gpt, torch_reference(_gpt),
             compare_torch(_models, _table), torch_thread_configs,
             bench_activation_memory, torch_load_weights, gpt_equivalence
  checks     bitwise_outputs: two runs' outputs compared (bitwise_compare.sh)
  tokenizer  ddp_tokenize beside tiktoken: tiktoken_gpt2, tokenizer_texts, bench_tokenizer

No install needed: with launch/ on the path (PYTHONPATH=launch, or the
current directory launch/), `python3 -m ddp_tools.<family>.<tool>` runs a
tool; launch/<tool>.py, the scripts the README shows, run the same cli()
function, and so do the console scripts of launch/pyproject.toml where the
package is pip-installed. Imports between the modules are absolute
(ddp_tools.<family>.<module>); none edits sys.path.

Started as a tool (launch/<tool>.py, `-m ddp_tools...`) under an interpreter
that lacks the family's packages, the process re-executes itself with the one
launch/install_deps.sh provisioned (/usr/bin/python3) where that one has them:
common/interpreter.py, which says why and when.
"""
from ddp_tools.common import interpreter as _interpreter

_interpreter.reexec_if_needed()
