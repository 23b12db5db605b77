"""From SQL to a planned query: parse (sql.py), build nodes (builder.py), run the passes
(passes/, in the order of passes.PASSES), cut into stages (stages.py), print it (explain.py).
plan_query returns a Plan (plan.py) holding its StagePlans."""

from jobs.plan.plan import Plan, StagePlan
from jobs.plan.planner import plan_query

__all__ = ["Plan", "StagePlan", "plan_query"]
