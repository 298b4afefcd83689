"""AsyncEngine over the real tiny LLMEngine: outputs reach their streams, aborts free the sequence,
commands run between steps, and the thread sleeps when idle."""

import asyncio

import pytest

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.server.async_engine import AsyncEngine, EngineDeadError


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(
        EngineConfig(model="tiny", max_num_seqs=4, kv_blocks=64, max_model_len=256), run_dir=None
    )


def _params(n: int) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_concurrent_requests_each_get_their_own_tokens(engine):
    async def main():
        aeng = AsyncEngine(engine)
        aeng.start()
        try:
            streams = [aeng.add_request(f"r{i}", [5, 6, 7 + i], _params(3 + i)) for i in range(3)]

            async def drain(stream):
                return [out async for out in stream]

            results = await asyncio.gather(*(drain(s) for s in streams))
            assert aeng.num_open == 0
            return results
        finally:
            await aeng.shutdown()

    results = _run(main())
    for i, outs in enumerate(results):
        assert sum(len(o.new_token_ids) for o in outs) == 3 + i
        assert outs[-1].finished and outs[-1].finish_reason == "length"
        assert all(not o.finished for o in outs[:-1])
        assert all(len(o.new_token_ids) == 1 for o in outs)  # one token per step for one request
    assert not engine.has_unfinished()


def test_abort_frees_the_sequence_before_it_finishes(engine):
    async def main():
        aeng = AsyncEngine(engine)
        aeng.start()
        try:
            stream = aeng.add_request("long", [1, 2, 3], _params(200))
            await stream.__anext__()  # it is running
            aeng.abort("long")
            assert aeng.num_open == 0
            # A command runs between steps, after the abort command: the engine has no work left.
            return await aeng.run_in_engine(lambda e: e.has_unfinished())
        finally:
            await aeng.shutdown()

    assert _run(main()) is False


def test_idle_thread_does_not_step(engine):
    async def main():
        aeng = AsyncEngine(engine)
        aeng.start()
        try:
            stream = aeng.add_request("one", [4, 5], _params(2))
            _ = [o async for o in stream]
            steps = aeng.steps
            await asyncio.sleep(0.2)
            return steps, aeng.steps
        finally:
            await aeng.shutdown()

    before, after = _run(main())
    assert before == after


def test_requests_after_shutdown_fail_and_open_streams_are_failed(engine):
    async def main():
        aeng = AsyncEngine(engine)
        aeng.start()
        stream = aeng.add_request("cut", [1, 2], _params(500))
        await stream.__anext__()
        await aeng.shutdown()
        with pytest.raises(EngineDeadError):
            async for _ in stream:
                pass
        with pytest.raises(EngineDeadError):
            aeng.add_request("late", [1], _params(1))
        engine.abort_request("cut")  # the thread is gone: clean the shared engine directly

    _run(main())


def test_duplicate_request_id_is_rejected(engine):
    async def main():
        aeng = AsyncEngine(engine)
        aeng.start()
        try:
            aeng.add_request("dup", [1, 2], _params(50))
            with pytest.raises(ValueError, match="dup"):
                aeng.add_request("dup", [1, 2], _params(1))
            aeng.abort("dup")
        finally:
            await aeng.shutdown()

    _run(main())


def test_abort_all_ends_open_streams_and_frees_the_engine(engine):
    async def main():
        aeng = AsyncEngine(engine)
        aeng.start()
        try:
            streams = [aeng.add_request(f"all{i}", [1, 2, i + 3], _params(300)) for i in range(2)]
            await streams[0].__anext__()
            assert aeng.abort_all("closing") == 2 and aeng.num_open == 0
            for stream in streams:
                with pytest.raises(EngineDeadError, match="closing"):
                    async for _ in stream:
                        pass
            return await aeng.run_in_engine(lambda e: e.has_unfinished())
        finally:
            await aeng.shutdown()

    assert _run(main()) is False
