"""Put first on PYTHONPATH to hide hiredis from redis-py (its pure-Python parser is used)."""

raise ImportError("hiredis hidden for the benchmark (benchmarks/peers/nospeedups)")
