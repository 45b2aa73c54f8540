"""The worker process: reliable fetch, the processor pool, retries, scheduled jobs,
heartbeat, orphan recovery and the launcher that wires them. The admin API
(:mod:`rfetch.api`) never imports it, nor it the API."""
