"""Fault-injection simulator: realistic traces of LLM serving and microservices with a known
root cause (`rca simulate`, the benchmark suites, `rca demo`)."""

from simulation.case import Root, SimulatedCase, Truth
from simulation.scenarios import SCENARIOS, simulate

__all__ = ["SCENARIOS", "Root", "SimulatedCase", "Truth", "simulate"]
