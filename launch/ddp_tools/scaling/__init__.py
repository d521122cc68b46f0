"""ddp_tools.scaling: the scaling model (scaling_model, scaling_model_core, scaling_model_inputs)
and its validation against traces (validate_scaling_model, validation_runs, trace_exposure)."""
