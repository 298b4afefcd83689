"""Code that more than one of spikelens' processes runs: the engine server and the Locust client.

Why a package of its own: what both ends of a measurement share must not live inside either
end (`engine` would drag the engine into the Locust process, `loadgen` gevent into the server).
Modules here import only the standard library and nothing else of spikelens.

- `socket_clock`: kernel receive timestamps of TCP sockets (``SO_TIMESTAMPNS``).
"""
