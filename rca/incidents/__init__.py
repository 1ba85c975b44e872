"""Incidents: alerts clustered into incidents, their rankings, their causal graphs and responders'
labels, behind the `IncidentStore` protocol that the database adapter implements."""
