"""Put first on PYTHONPATH to hide orjson from rfetch (the standard json module is used)."""

raise ImportError("orjson hidden for the benchmark (benchmarks/peers/nospeedups)")
