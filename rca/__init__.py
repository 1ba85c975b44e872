"""rca's core, in packages that depend one way: `telemetry` (what arrives) → `graph` (windowed
statistics) → `evidence` (change scores per candidate) → `ranking` (what a ranking is) →
`incidents` (alerts, incidents and their rankings). `rca.app` is the composition root and CLI."""
