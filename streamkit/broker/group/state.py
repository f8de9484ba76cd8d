"""Consumer-group states of Kafka's classic rebalance protocol: one table of
(state, event) -> next state.

The group logic (``group.py``) never assigns a state itself: it names the event that just
happened and the table says where the group goes. A pair missing from the table is a bug in
the caller, raised as ``IllegalTransition`` naming the state and the event.

States:

- Empty: no members (offsets may still be stored). A new group starts here; a group loaded
  from ``__consumer_offsets`` whose last record lists members starts Stable
  (``initial_state``, Kafka's GroupMetadata.loadGroup).
- PreparingRebalance: members are (re)joining.
- CompletingRebalance: the generation is fixed and the join responses sent; waiting for the
  leader's SyncGroup with the assignment.
- Stable: assignment delivered; members heartbeat.
- Dead: the group was deleted; nothing leaves this state.

Events and the rules they follow:

- MEMBER_JOIN: a new member joins, or a known one rejoins in a way that needs a new
  generation (changed metadata, the leader rejoining, any rejoin while Preparing). Every
  live state goes to PreparingRebalance; in PreparingRebalance it stays (the member is
  simply one more to wait for). A static member that restarts with unchanged metadata in a
  Stable group is no event at all: it takes over its old place (KIP-345).
- MEMBER_LEAVE: a member sent LeaveGroup or its session expired. In Stable and
  CompletingRebalance the survivors must rebalance; in PreparingRebalance it stays (one fewer
  member to wait for). Empty has no members to lose.
- SYNC_TIMEOUT: in CompletingRebalance the leader sent no assignment within the rebalance
  timeout; the members that did not sync are dropped and the rest rebalance.
- JOIN_COMPLETE: in PreparingRebalance every member has joined (or the rebalance timeout
  passed and the missing dynamic members were dropped) and members remain: the next
  generation starts, CompletingRebalance.
- ALL_LEFT: the join phase ended with nobody left: the generation still advances and the
  group is Empty.
- LEADER_SYNC: in CompletingRebalance the leader's SyncGroup carried the assignment: Stable.
- DELETE: DeleteGroups (or the group's coordinator going away): Dead, from any live state.

Requests that only read the state (Heartbeat, OffsetCommit, a follower's SyncGroup, a rejoin
with unchanged metadata in Stable) are answered from it and are not events.
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType

__all__ = [
    "ALLOWED_TRANSITIONS",
    "TRANSITIONS",
    "GroupEvent",
    "GroupState",
    "IllegalTransition",
    "check_transition",
    "initial_state",
    "next_state",
]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(Enum):
    MEMBER_JOIN = "member join"
    MEMBER_LEAVE = "member leave"
    SYNC_TIMEOUT = "sync timeout"
    JOIN_COMPLETE = "join complete"
    ALL_LEFT = "all members left"
    LEADER_SYNC = "leader sync"
    DELETE = "delete"


_E = GroupState.EMPTY
_P = GroupState.PREPARING_REBALANCE
_C = GroupState.COMPLETING_REBALANCE
_S = GroupState.STABLE
_D = GroupState.DEAD
_EV = GroupEvent

TRANSITIONS: MappingProxyType[tuple[GroupState, GroupEvent], GroupState] = MappingProxyType({
    (_E, _EV.MEMBER_JOIN): _P,
    (_E, _EV.DELETE): _D,

    (_P, _EV.MEMBER_JOIN): _P,
    (_P, _EV.MEMBER_LEAVE): _P,
    (_P, _EV.JOIN_COMPLETE): _C,
    (_P, _EV.ALL_LEFT): _E,
    (_P, _EV.DELETE): _D,

    (_C, _EV.MEMBER_JOIN): _P,
    (_C, _EV.MEMBER_LEAVE): _P,
    (_C, _EV.SYNC_TIMEOUT): _P,
    (_C, _EV.LEADER_SYNC): _S,
    (_C, _EV.DELETE): _D,

    (_S, _EV.MEMBER_JOIN): _P,
    (_S, _EV.MEMBER_LEAVE): _P,
    (_S, _EV.DELETE): _D,
})

# The state changes the table allows: Kafka's GroupState.validPreviousStates (less Dead -> Dead).
ALLOWED_TRANSITIONS: frozenset[tuple[GroupState, GroupState]] = frozenset(
    (src, dst) for (src, _event), dst in TRANSITIONS.items() if src != dst
)


class IllegalTransition(RuntimeError):
    pass


def next_state(current: GroupState, event: GroupEvent) -> GroupState:
    """Where ``event`` takes a group in state ``current``; IllegalTransition if nowhere."""
    try:
        return TRANSITIONS[(current, event)]
    except KeyError:
        raise IllegalTransition(
            f"group state {current.value} has no transition for event {event.value!r}"
        ) from None


def check_transition(current: GroupState, target: GroupState) -> None:
    """Raise IllegalTransition unless some event moves ``current`` to ``target``."""
    if (current, target) not in ALLOWED_TRANSITIONS:
        raise IllegalTransition(f"group state {current.value} cannot move to {target.value}")


def initial_state(loaded_members: bool) -> GroupState:
    """A new group starts Empty; one loaded with members from __consumer_offsets, Stable."""
    return _S if loaded_members else _E
