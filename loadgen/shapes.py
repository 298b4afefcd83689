"""Closed-loop load shapes as pure functions of time: how many users should be running now.

Times are seconds from the start of *measured* load (docs/design.md "Scenarios"); during warm-up
(t < 0) every shape holds its value at t = 0. The runner takes the initial user count from them
and the locustfile's controller greenlet (`_drive_shape`) the count at each change time; nothing
else decides how many users run, so the shapes are tested without Locust.
"""

from __future__ import annotations

from loadgen.spec import LoadSpec


def target_users(load: LoadSpec, t_s: float, duration_s: float) -> int:
    """Users the closed-loop shape wants at `t_s` seconds after load start (pure)."""
    t = max(t_s, 0.0)
    if load.shape == "constant":
        return load.users
    if load.shape == "ramp":
        ramp_s = load.ramp_s if load.ramp_s is not None else duration_s
        frac = min(t / ramp_s, 1.0) if ramp_s > 0 else 1.0
        return round(load.start_users + (load.users - load.start_users) * frac)
    if load.shape == "step":
        users = load.users  # before the first stage
        for stage in load.stages:
            if t >= stage.at_s:
                users = stage.users
        return users
    if load.shape == "spike":
        in_spike = load.spike_start_s <= t < load.spike_start_s + load.spike_duration_s
        if not in_spike:
            return load.users
        if load.spike_users is None:
            raise ValueError("load.spike_users: required for load.shape 'spike'")
        return load.spike_users
    raise ValueError(f"load.shape {load.shape!r} is not a closed-loop shape")


def spawn_rate(load: LoadSpec) -> float:
    """Users started (or stopped) per second when the target changes; default: all within ~1 s,
    the largest count the shape ever asks for."""
    if load.spawn_rate is not None:
        return load.spawn_rate
    peak = max([load.users, load.spike_users or 0, *[s.users for s in load.stages]])
    return float(max(peak, 1))


def change_times(load: LoadSpec, duration_s: float) -> list[float]:
    """Times (s after load start) where a closed-loop target changes; the locustfile's controller
    greenlet sleeps until each of these instead of polling, so steps and spikes start on time."""
    if load.shape == "step":
        return [s.at_s for s in load.stages]
    if load.shape == "spike":
        return [load.spike_start_s, load.spike_start_s + load.spike_duration_s]
    if load.shape == "ramp":
        ramp_s = load.ramp_s if load.ramp_s is not None else duration_s
        steps = abs(load.users - load.start_users)
        return [ramp_s * i / steps for i in range(1, steps + 1)] if steps else []
    return []
