"""The service-causality graph: event-time windowed statistics per node, operation and edge, the
single writer that feeds it, and the views (networkx, dense window series) read from it."""
