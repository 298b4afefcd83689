"""What tests and benchmarks share, none of it shipped with spikelens (`tests` is not an installed
package): imported as `tests.support.<module>` from the repository root.

- `runbuilder`: run directories from a small engine simulation (the warehouse, rca, page and
  flow tests, bench/detect_noise.py, scripts/render_every_page.py).
- `sse_server`: a no-op OpenAI-compatible streaming server with controlled delays, to test and
  calibrate the load generator without an engine (loadgen and collector tests, bench/loadgen.py).
- `vllm_setup`: a tiny Llama checkpoint vLLM's CPU build can serve, and the vLLM virtualenv's
  interpreter (the vLLM end-to-end tests).

Why here and not in bench/: the tests are the main users and already a package; bench scripts run
from the repository root (or put it on sys.path themselves) and import the same modules.
"""
