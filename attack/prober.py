"""The probe: a session of its own that pings every few milliseconds and reports each
round trip. The streams phase runs one in a process of its own; the attach-storm and
dead-tokens phases ask the Prober (PROBER, started by the command line before the
generator is niced) to run theirs, so the probe keeps the default priority."""
from __future__ import annotations

import multiprocessing
import socket
import statistics
import time


def probe(port: int, seconds: float, interval: float, results: "multiprocessing.Queue[list[float]]") -> None:
    """Pings on a session of its own; puts each round trip (ms), or [-1] if the server went away."""
    latencies: list[float] = []
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        reader.readline()  # welcome
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            sock.sendall(b"ping\n")
            line = reader.readline()
            if not line:
                raise ConnectionError("closed")
            latencies.append((time.perf_counter() - start) * 1000)
            time.sleep(interval)
    except (OSError, ConnectionError):
        latencies.append(-1)
    results.put(latencies)


class Prober:
    """A process, started before the generator is niced (--nice), that runs probes on request:
    the probe keeps the default priority in every phase."""

    def __init__(self) -> None:
        self.requests: multiprocessing.Queue[tuple[int, float] | None] = multiprocessing.Queue()
        self.results: multiprocessing.Queue[list[float]] = multiprocessing.Queue()
        self.process = multiprocessing.Process(target=self.serve, args=(self.requests, self.results), daemon=True)
        self.process.start()

    @staticmethod
    def serve(requests: "multiprocessing.Queue[tuple[int, float] | None]",
              results: "multiprocessing.Queue[list[float]]") -> None:
        for port, seconds in iter(requests.get, None):
            probe(port, seconds, 0.005, results)

    def start(self, port: int, seconds: float) -> None:
        self.requests.put((port, seconds))

    def latencies(self, seconds: float) -> list[float]:
        return self.results.get(timeout=seconds + 30)

    def stop(self) -> None:
        self.requests.put(None)
        self.process.join(timeout=5)


# Set by the command line when a phase needs it; the phases read it as prober.PROBER.
PROBER: Prober | None = None


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 100 else max(latencies, default=0.0)
