"""What a root-cause ranking is (causes, evidence, sources) and the interfaces that make one:
the `Ranker` and the telemetry a ranking pulls for itself."""
