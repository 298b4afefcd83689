"""Classify a Python stack sample into a code region by rules on file and function names.

What: `classify(frames)` takes a sample's frames leaf first, as (function, filename) pairs, and
returns (region, rule index): the first rule of REGION_RULES, in table order, that matches a
frame (a `leaf_only` rule only looks at the innermost frame). No match is `other`.
Why a table in this order: a stack holds several regions at once (model forward calls an
all-reduce; the model runner calls the sampler; the server calls the tokenizer); the more
specific cost wins — waiting in a collective is not forward compute, penalty work inside the
model runner is sampling. `idle` comes first but only for the innermost frame: a thread blocked
in a wait is idle whatever called it.
GC: py-spy's Python stacks do not show the collector (it runs in C under whatever frame
allocated), so GC time is not found here but by time: the warehouse counts a sample as `gc` when
it falls inside a pause that the GC hook recorded for the same process (only the hook's own
callback frame is matched here).
Injectors: samples taken in a fault injector's own thread (INJECTOR_THREADS) are not classified
but dropped by the reader (collectors/chrometrace.py), so no injector shows in the stacks.
Covers spikelens' engine (engine/…) and vLLM's module layout (vllm/v1/sample, vllm/model_executor,
vllm/v1/core/sched, vllm/entrypoints, vllm/distributed, tokenizers). Filenames are matched as
substrings of py-spy's full filenames.
"""

from __future__ import annotations

from dataclasses import dataclass

REGIONS = (
    "sampling_penalties",
    "gc",
    "collective_wait",
    "model_forward",
    "scheduler",
    "tokenizer_detokenizer",
    "http_serialization",
    "idle",
    "other",
)


@dataclass(frozen=True)
class RegionRule:
    region: str
    files: tuple[str, ...] = ()  # any of these substrings of the filename …
    functions: tuple[str, ...] = ()  # … and (when given) the function name is one of these
    leaf_only: bool = False  # match the innermost frame only
    reason: str = ""

    def matches(self, function: str, filename: str) -> bool:
        if self.files and not any(f in filename for f in self.files):
            return False
        return not self.functions or function in self.functions


_WAITS = (
    "wait",
    "Condition.wait",
    "Event.wait",
    "_wait_for_tstate_lock",
    "join",
    "Thread.join",
    "get",
    "Queue.get",
    "select",
    "EpollSelector.select",
    "PollSelector.select",
    "SelectSelector.select",
    "poll",
    "recv",
    "recv_multipart",
    "Socket.recv",
    "Socket.recv_multipart",
    "Poller.poll",
    "accept",
    "_recv",
    "_recv_bytes",
    "_poll",
    "Connection._poll",
    "Connection.recv",
    "Connection._recv_bytes",
    "Connection.poll",
    "acquire",
    "sleep",
    "serve_forever",
    "BaseSelector.select",
)

REGION_RULES: tuple[RegionRule, ...] = (
    RegionRule(
        "idle",
        (
            "threading.py",
            "selectors.py",
            "queue.py",
            "multiprocessing/connection.py",
            "zmq/sugar/",
            "zmq/green/",
            "socket.py",
            "selector_events.py",
            "socketserver.py",
        ),
        _WAITS,
        leaf_only=True,
        reason="innermost frame blocks in a stdlib/zmq wait: the thread has nothing to do",
    ),
    RegionRule(
        "idle",
        ("vllm/distributed/device_communicators/shm_broadcast.py",),
        ("acquire_read", "MessageQueue.acquire_read", "dequeue", "MessageQueue.dequeue"),
        leaf_only=True,
        reason="a vLLM worker polling its input queue for the next step (busy-wait for work)",
    ),
    RegionRule("gc", ("collectors/site/sitecustomize.py",), reason="spikelens' GC hook callback"),
    RegionRule(
        "collective_wait",
        (
            "torch/distributed/distributed_c10d.py",
            "engine/parallel/comm.py",
            "vllm/distributed/communication_op.py",
            "vllm/distributed/device_communicators/",
            "vllm/distributed/parallel_state.py",
        ),
        reason="all-reduce/broadcast/barrier: a rank waiting for the others",
    ),
    RegionRule(
        "sampling_penalties",
        (
            "engine/sampling/",
            "engine/kernels/",
            "engine/faults/penalty_slow_path.py",
            "vllm/v1/sample/",
            "vllm/model_executor/layers/sampler.py",
            "vllm/model_executor/layers/utils.py",
        ),
        reason="penalties, temperature, top-k/top-p and the draw (engine and vLLM samplers)",
    ),
    RegionRule(
        "tokenizer_detokenizer",
        (
            "engine/tokenizer.py",
            "engine/server/detokenizer.py",
            "/tokenizers/",
            "transformers/tokenization_",
            "vllm/transformers_utils/tokenizer",
            "vllm/tokenizers/",
            "vllm/v1/engine/detokenizer.py",
            "vllm/transformers_utils/detokenizer",
        ),
        reason="text to ids and ids to text",
    ),
    RegionRule(
        "scheduler",
        (
            "engine/scheduler.py",
            "engine/kv_cache.py",
            "vllm/v1/core/sched/",
            "vllm/v1/core/kv_cache_manager.py",
            "vllm/v1/core/block_pool.py",
            "vllm/v1/core/kv_cache_utils.py",
            "vllm/v1/core/single_type_kv_cache_manager.py",
        ),
        reason="batch selection, KV block allocation, preemption",
    ),
    RegionRule(
        "model_forward",
        (
            "engine/model.py",
            "engine/model_loader.py",
            "torch/nn/modules/",
            "torch/nn/functional.py",
            "vllm/model_executor/",
            "vllm/attention/",
            "vllm/v1/attention/",
            "vllm/v1/worker/",
            "vllm/forward_context.py",
        ),
        reason="the model's layers and the model runner that prepares their inputs",
    ),
    RegionRule(
        "http_serialization",
        (
            "engine/server/",
            "uvicorn/",
            "starlette/",
            "fastapi/",
            "h11/",
            "httptools/",
            "anyio/",
            "pydantic/",
            "/json/",
            "msgspec/",
            "vllm/entrypoints/",
            "vllm/v1/serial_utils.py",
            "vllm/v1/engine/output_processor.py",
            "vllm/v1/engine/core_client.py",
        ),
        reason="HTTP, request/response models, JSON and IPC (de)serialisation",
    ),
)


# Threads a fault injector runs inside an engine process: their stacks are not the engine's
# work, and ground truth must not reach the telemetry the analysis reads, so the collectors drop
# every sample taken in them (chrometrace). Their cost still lands where it should: the GC pauses
# they cause are the process's own collections (the GC hook records them) and the GIL they hold
# slows the engine's own threads.
INJECTOR_THREADS: tuple[RegionRule, ...] = (
    RegionRule(
        "injector",
        ("engine/faults/gc_storm.py",),
        ("_run", "GcStorm._run"),
        reason="memory.gc_storm's churn thread in spikelens' engine",
    ),
    RegionRule(
        "injector",
        ("injectors/process_churn.py",),
        reason="memory.gc_storm's churn thread the GC hook starts in a vLLM process",
    ),
)


def is_injector_thread(frames: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> bool:
    """Whether a sample (frames leaf first) was taken in a fault injector's thread."""
    return any(
        rule.matches(function, filename)
        for rule in INJECTOR_THREADS
        for function, filename in frames
    )


def classify(frames: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> tuple[str, int]:
    """(region, index of the matching rule, -1 for `other`) of a sample; frames leaf first."""
    for index, rule in enumerate(REGION_RULES):
        if rule.leaf_only:
            if frames and rule.matches(*frames[0]):
                return rule.region, index
        elif any(rule.matches(function, filename) for function, filename in frames):
            return rule.region, index
    return "other", -1
