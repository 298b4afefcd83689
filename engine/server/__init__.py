"""The engine's OpenAI-compatible HTTP server.

- ``protocol``: request models for /v1/completions and /v1/chat/completions (vLLM's accepted fields).
- ``errors``: the OpenAI error shape and the exception that carries it to a response.
- ``async_engine``: runs the (thread-unsafe) ``LLMEngine`` in one background thread for asyncio.
- ``detokenizer``: incremental token → text deltas for streaming.
- ``sse``: Server-Sent-Events framing.
- ``app``: the FastAPI application; ``serve``: the ``python -m engine serve`` process.
"""
