"""Fault injectors that act from beside an engine, not inside spikelens' own engine or loadgen.

- `delay_proxy`: `network.delay`, a TCP proxy between loadgen and the engine (any runtime).
- `cpu_contention`: `host.cpu_contention`, hog processes on the engine's CPUs (any engine
  spikelens starts).
- `process_faults` (+ `process_churn`, loaded by the GC hook inside the engine's processes):
  `memory.gc_storm` in a chosen process of an engine spikelens cannot change (vLLM).

Which kind each applies on which runtime is spikelens_common.fault_catalogue; the flows hand
each injector only its own faults (flows/fault_routing.py). Every injector writes its ground
truth with spikelens_common.ground_truth and nothing else: no file the analysis reads (the
collectors drop the churn thread's stack samples, collectors/regions.py INJECTOR_FILES).
Injectors import only spikelens_common.
"""
