"""Outside-in telemetry of any engine process tree spikelens starts (its own engine, vLLM).

- `hook_env(collect_dir, role)`: the environment that puts the GC hook (`collectors/site`) into
  a child and its descendants: GC pauses per process in `collect/gc-<pid>.jsonl`.
- `CollectorSet(run_dir, root_pid, role, metrics_url, options).start()` / `.stop()`: py-spy
  stack samples by code region, /proc CPU and scheduling counters, /metrics scrapes.
They only measure: they import nothing of spikelens but `spikelens_common`, the fault
injectors live in `injectors/`, and none of them writes these files.
"""

from collectors.gc_hook import hook_env
from collectors.options import CollectorOptions
from collectors.supervisor import CollectorSet, collect_dir

__all__ = ["CollectorOptions", "CollectorSet", "collect_dir", "hook_env"]
