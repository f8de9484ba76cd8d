"""Fraud alerts from bursts of card activity, with session windows.

Input: ``card_transactions``, JSON ``{"card", "amount", "merchant"}`` keyed by card id;
the record timestamp is the time of the transaction.

A card's transactions with no more than 5 minutes between one and the next form a session
(``streamkit.session``). Each session's transaction count and total amount are aggregated;
once the session is over (5 minutes without a transaction on it, plus a 30 s grace period
for stragglers, by event time) ``.final()`` emits it, and sessions with at least
``MAX_TRANSACTIONS`` transactions or at least ``MAX_TOTAL`` spent go to ``fraud_alerts``:
``{"card", "start", "end", "count", "total"}`` keyed by card, ``start``/``end`` the first
transaction's and the last one's timestamps (ms).

Sessions close by per-partition stream time: a session is final once a later transaction on
the same partition (any card) is past its last transaction + gap + grace. The input must be
keyed by card (each partition's sessions live with that partition); for input keyed by
anything else, put ``.group_by(lambda t: t.card, name="by_card")`` before ``.window``.

Run it::

    streamkit worker -A apps.fraud                                 # embedded broker
    streamkit worker -A apps.fraud --broker 127.0.0.1:9092
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

import streamkit
from streamkit.streams.dsl import WindowResult

GAP = timedelta(minutes=5)
GRACE = timedelta(seconds=30)
MAX_TRANSACTIONS = 5
MAX_TOTAL = 1000.0


class Transaction(BaseModel):
    card: str
    amount: float
    merchant: str = ""


class SessionStats(BaseModel):
    count: int = 0
    total: float = 0.0


class FraudAlert(BaseModel):
    card: str
    start: int
    end: int
    count: int
    total: float


def add(stats: SessionStats, payment: Transaction) -> SessionStats:
    """Fold a transaction into its session's stats."""
    return SessionStats(count=stats.count + 1, total=stats.total + payment.amount)


def merge(a: SessionStats, b: SessionStats) -> SessionStats:
    """Combine two sessions that a late transaction bridges into one."""
    return SessionStats(count=a.count + b.count, total=a.total + b.total)


def suspicious(result: WindowResult) -> bool:
    stats: SessionStats = result.value
    return stats.count >= MAX_TRANSACTIONS or stats.total >= MAX_TOTAL


def alert(result: WindowResult) -> FraudAlert:
    stats: SessionStats = result.value
    # Session windows are stored half-open: end is one past the last transaction.
    return FraudAlert(card=result.key, start=result.start, end=result.end - 1,
                      count=stats.count, total=stats.total)


app = streamkit.App("fraud")
transactions = app.topic("card_transactions", value_type=Transaction)

(app.stream(transactions)
    .window(streamkit.session(GAP), grace=GRACE)
    .aggregate(SessionStats, add, merger=merge, value_type=SessionStats, name="card_sessions")
    .final()
    .filter(suspicious)
    .map(alert)
    .to("fraud_alerts", value_type=FraudAlert))
