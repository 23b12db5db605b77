"""Regular joins (inner, left, right, full, semi, anti): the shared join, the local and the spark implementation."""
