"""Helpers of bench/loadgen.py's side-by-side run of loadgen, GuideLLM and AIPerf: each tool's
command line, parsers of its per-request output, a CPU sampler over its process tree, and the
figures (requests/s, CPU per request, TTFT error against the no-op server's send stamps)."""
