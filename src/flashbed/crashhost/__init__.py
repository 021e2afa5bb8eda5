"""The host's side of checking crash states."""
