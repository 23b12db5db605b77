"""The streaming changelog job: staged changelog -> Spark Structured Streaming -> Delta upsert sink."""
