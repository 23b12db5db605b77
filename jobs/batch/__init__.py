"""The batch job: the user's SQL, through spark.sql, on the snapshot the stream had consumed."""
