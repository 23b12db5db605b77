"""The `lockstep` command line."""
