"""checkpoint_cost.py: what a checkpoint costs the steps, in the scaling model (issue 31).

ddp_train's checkpoint is one file of the whole FP32 state (masters and the optimizer's state:
12 bytes a parameter with AdamW, 8 with momentum SGD), gathered inside the shard group at
--zero >= 1 (an all-gather of the FP32 ranges), copied to host memory and packed by tensor
name, and written by rank 0 (temporary file, fsync, rename).

- synchronous: every rank waits for the gather, the copy and the write;
- --async-checkpoint: the steps wait for the gather and the copy only; the write runs on a
  background thread beside training, and the next checkpoint waits for it only if it has not
  ended by then (`interval_s` of training later).

Two storage presets, each stated as an assumption:
- cpu-host: this repository's CPU host, calibrated on the 107.6 MB MLP of
  launch/results/2026-12-05-cpu-async-checkpoint.md (async blocked 0.124 s: the copy's two
  passes at 0.87 GB/s together; sync 0.55 s: the write after it at 0.25 GB/s, fsync included);
- h200-node: nominal, not measured: a device-to-host copy into pinned memory at 25 GB/s (half
  of PCIe Gen5 x16's 50 GB/s one way, as NCCL's and DeepSpeed's users see it under load) and a
  local NVMe write at 2 GB/s.
"""

from ddp_tools.scaling.scaling_model_core import ModelError


class Storage:
    def __init__(self, name, host_copy_Bps, write_Bps):
        if not (host_copy_Bps > 0 and write_Bps > 0):
            raise ModelError(f"storage {name}: the copy and write bandwidths must be positive")
        self.name, self.host_copy_Bps, self.write_Bps = name, host_copy_Bps, write_Bps


STORAGE = {
    "cpu-host": Storage("cpu-host", 107_602_720 / 0.124, 107_602_720 / (0.555 - 0.124)),
    "h200-node": Storage("h200-node", 25e9, 2e9),
}


def state_bytes(parameters, adamw=True):
    """The checkpoint's state: FP32 masters and the optimizer's FP32 state (AdamW: two moments)."""
    return 4 * parameters * (3 if adamw else 2)


def checkpoint_cost(nbytes, storage, asynchronous, gather_s=0.0, interval_s=float("inf")):
    """Seconds one checkpoint of `nbytes` of state blocks every rank's steps (`blocked_s`),
    and its parts: the gather (given: the cluster's all-gather of the state in the shard group,
    0 unsharded), the host copy, the write, and (async) the wait for the previous write, which
    started `interval_s` of training before."""
    copy_s, write_s = nbytes / storage.host_copy_Bps, nbytes / storage.write_Bps
    if not asynchronous:
        return {"gather_s": gather_s, "copy_s": copy_s, "write_s": write_s, "wait_s": 0.0,
                "blocked_s": gather_s + copy_s + write_s}
    wait_s = max(0.0, write_s - interval_s)
    return {"gather_s": gather_s, "copy_s": copy_s, "write_s": write_s, "wait_s": wait_s,
            "blocked_s": gather_s + copy_s + wait_s}
