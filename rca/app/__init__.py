"""The composition root and the command line: the one place that wires the core to its adapters
(`ingest`, `api`, `storage`, `models`) and to the tools (`simulation`, `benchmarks`)."""
