"""Tensor parallelism: rank 0 (the LLMEngine) schedules and samples; worker ranks run their slice of
every forward in lockstep. ``comm`` times the collectives; ``group`` starts and drives the workers."""

from engine.parallel.comm import TPComm
from engine.parallel.group import TPGroup

__all__ = ["TPComm", "TPGroup"]
