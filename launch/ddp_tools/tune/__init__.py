"""ddp_tools.tune: the Optuna hyperparameter search (tune; tune_space, tune_trial, tune_report)."""
