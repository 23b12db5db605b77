"""From SQL to an annotated plan: parse (sql.py), build nodes (builder.py), run the passes
(passes/, in the order of passes.PASSES), print it (explain.py)."""

from jobs.plan.planner import QueryPlan, plan_query

__all__ = ["QueryPlan", "plan_query"]
