"""Evidence: per candidate node, the change-point scores of every signal over an incident window,
and the relations between candidates that the health model reads."""
