"""Fault-injection simulator: realistic traces of LLM serving and microservices with a known
root cause (`rca simulate`, the benchmark suites, `rca demo`)."""

from rca.simulation.case import Root, SimulatedCase, Truth
from rca.simulation.scenarios import SCENARIOS, simulate

__all__ = ["SCENARIOS", "Root", "SimulatedCase", "Truth", "simulate"]
