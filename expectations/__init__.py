"""The check: Great Expectations suites that judge a run (stream/batch unity, retraction
handling, windows, state), the diagnosis of a difference, and the report.

    suites/        one module per suite; each expectation is a class that builds its own query
    columns.py     the sink's columns and the one tolerance rule for floating values
    sql.py         the views the queries read, and SQL the expectations and the diagnosis share
    validate.py    running a suite through Great Expectations
    check.py       `lockstep check`: the data, the suites, the Report
    diagnosis.py   why stream and batch differ, row by row
    report/        the typed Report (model.py), its HTML page and the index of runs
"""
