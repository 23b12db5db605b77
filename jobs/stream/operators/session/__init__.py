"""Session windows: the shared session function, the local and the spark implementation."""
