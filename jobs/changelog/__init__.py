"""The changelog model: row kinds and weights, source formats, validation and staging."""
