"""The engine's face: evaluate, the Decision, what a check is and declares, the policy set."""
