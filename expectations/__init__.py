"""Great Expectations suites that judge a run: stream/batch unity and retraction handling.

    custom.py   the expectations, each a named UnexpectedRowsExpectation (a row it returns is a
                row that breaks the rule)
    queries.py  the SQL behind them, built from the sink key and the value columns
    suites.py   which expectations make up each suite, on which data
    check.py    `lockstep check`: run the suites, build Data Docs, write report.json
"""
