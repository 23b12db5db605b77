"""The streaming rules: every plan node the planner can put below a stage's sink has one, and an
operator's rule is found in its own folder."""

import inspect

import jobs.plan.nodes as nodes
from jobs.stream.rules import RULES

# Abstract bases, and the root of a stage (its emitter and writer take the sink, not a rule).
NOT_STREAMED = {nodes.Node, nodes.Unary, nodes.StagedInput, nodes.Sink}


def test_every_plan_node_below_a_sink_has_a_streaming_rule():
    plan_nodes = {
        cls
        for _, cls in inspect.getmembers(nodes, inspect.isclass)
        if issubclass(cls, nodes.Node) and cls.__module__ == nodes.__name__
    }
    assert plan_nodes - NOT_STREAMED == set(RULES)


def test_a_stateful_operators_rule_lives_in_its_folder():
    folders = {
        node.__name__: RULES[node].__module__ for node in (nodes.Deduplicate, nodes.Join, nodes.SessionAggregate)
    }
    assert folders == {
        "Deduplicate": "jobs.stream.operators.deduplicate.rule",
        "Join": "jobs.stream.operators.join.rule",
        "SessionAggregate": "jobs.stream.operators.session.rule",
    }
    assert RULES[nodes.GroupAggregate] is RULES[nodes.WindowAggregate]
