"""The consumer-group state machine: the (state, event) -> state table, checked pair by pair,
and the state changes it allows against Kafka's."""

from __future__ import annotations

import itertools

import pytest

from streamkit.broker.group.group import Group, GroupSettings
from streamkit.broker.group.state import (
    ALLOWED_TRANSITIONS,
    TRANSITIONS,
    GroupEvent,
    GroupState,
    IllegalTransition,
    check_transition,
    initial_state,
    next_state,
)

E = GroupState.EMPTY
P = GroupState.PREPARING_REBALANCE
C = GroupState.COMPLETING_REBALANCE
S = GroupState.STABLE
D = GroupState.DEAD

# Kafka's GroupState.validPreviousStates, written out independently of the code under test
# (Dead -> Dead left out on purpose: here Dead is terminal).
VALID_PREVIOUS = {
    P: {S, C, E},
    C: {P},
    S: {C},
    E: {P},
    D: {S, P, C, E},
}
ALLOWED = {(src, dst) for dst, sources in VALID_PREVIOUS.items() for src in sources}
ALL_PAIRS = list(itertools.product(GroupState, repeat=2))


def test_the_table_covers_exactly_five_states_with_kafka_names() -> None:
    # The names are user visible (DescribeGroups, ListGroups filters, kafka-consumer-groups.sh).
    assert {s.value for s in GroupState} == {
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead",
    }


@pytest.mark.parametrize(("src", "dst"), sorted(ALLOWED, key=str))
def test_allowed_transition_is_accepted(src: GroupState, dst: GroupState) -> None:
    check_transition(src, dst)  # does not raise


@pytest.mark.parametrize(("src", "dst"), sorted(set(ALL_PAIRS) - ALLOWED, key=str))
def test_any_other_transition_raises(src: GroupState, dst: GroupState) -> None:
    with pytest.raises(IllegalTransition) as info:
        check_transition(src, dst)
    assert src.value in str(info.value) and dst.value in str(info.value)


def test_allowed_and_forbidden_sets_split_all_25_pairs() -> None:
    accepted = set()
    for src, dst in ALL_PAIRS:
        try:
            check_transition(src, dst)
        except IllegalTransition:
            continue
        accepted.add((src, dst))
    assert accepted == ALLOWED
    assert len(accepted) == 10


def test_dead_is_terminal() -> None:
    for target in GroupState:
        with pytest.raises(IllegalTransition):
            check_transition(D, target)


def test_every_live_state_can_die_and_no_state_moves_to_itself() -> None:
    for state in (E, P, C, S):
        check_transition(state, D)
    for state in GroupState:
        with pytest.raises(IllegalTransition):
            check_transition(state, state)


def test_illegal_transition_is_a_runtime_error() -> None:
    # Callers that guard with ``except RuntimeError`` must still see it.
    assert issubclass(IllegalTransition, RuntimeError)


# -- the event table -------------------------------------------------------------------------

V = GroupEvent
# (state, event) -> next state, written out from the rules in state.py's docstring.
EXPECTED = {
    (E, V.MEMBER_JOIN): P, (E, V.DELETE): D,
    (P, V.MEMBER_JOIN): P, (P, V.MEMBER_LEAVE): P, (P, V.JOIN_COMPLETE): C, (P, V.ALL_LEFT): E,
    (P, V.DELETE): D,
    (C, V.MEMBER_JOIN): P, (C, V.MEMBER_LEAVE): P, (C, V.SYNC_TIMEOUT): P, (C, V.LEADER_SYNC): S,
    (C, V.DELETE): D,
    (S, V.MEMBER_JOIN): P, (S, V.MEMBER_LEAVE): P, (S, V.DELETE): D,
}
EVERY_PAIR = list(itertools.product(GroupState, GroupEvent))


@pytest.mark.parametrize(("state", "event"), EVERY_PAIR, ids=lambda x: x.name)
def test_every_state_event_pair_has_a_next_state_or_a_clear_error(state: GroupState, event: GroupEvent) -> None:
    if (state, event) in EXPECTED:
        assert next_state(state, event) is EXPECTED[(state, event)]
        return
    with pytest.raises(IllegalTransition) as info:
        next_state(state, event)
    assert str(info.value) == f"group state {state.value} has no transition for event {event.value!r}"


@pytest.mark.parametrize(("state", "event"), EVERY_PAIR, ids=lambda x: x.name)
def test_group_methods_move_by_the_table(state: GroupState, event: GroupEvent) -> None:
    """A Group in each state, fed each event: it lands where the table says or refuses
    without changing state."""
    group = Group("g", GroupSettings())
    group.state = state
    if (state, event) in EXPECTED:
        changed = group._fire(event)
        assert group.state is EXPECTED[(state, event)]
        assert changed == (state is not group.state)
    else:
        with pytest.raises(IllegalTransition):
            group._fire(event)
        assert group.state is state


def test_the_table_is_exactly_the_rules() -> None:
    assert dict(TRANSITIONS) == EXPECTED
    # Its state changes are Kafka's valid ones, no more, no fewer.
    assert ALLOWED_TRANSITIONS == ALLOWED
    # Nothing leaves Dead; DELETE reaches it from every live state.
    assert not [pair for pair in TRANSITIONS if pair[0] is D]
    assert {s for (s, e) in TRANSITIONS if e is V.DELETE} == {E, P, C, S}


def test_initial_states() -> None:
    assert initial_state(False) is E and initial_state(True) is S
    assert Group("g", GroupSettings()).state is E
    assert Group("g", GroupSettings(), loaded_members=True).state is S


def test_group_module_assigns_state_only_through_the_table() -> None:
    """The one-table rule, checked on the source: besides the constructor's initial state,
    group.py assigns ``self.state`` only in ``_fire``."""
    import ast
    import inspect

    from streamkit.broker.group import group as group_module

    tree = ast.parse(inspect.getsource(group_module))
    assigning = set()
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        for node in ast.walk(func):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
            if any(isinstance(t, ast.Attribute) and t.attr == "state" for t in targets):
                assigning.add(func.name)
    assert assigning == {"__init__", "_fire"}
