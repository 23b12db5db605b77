"""Group aggregates, on either engine: see jobs/stream/operators/__init__.py for which module runs where."""
