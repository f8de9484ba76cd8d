"""Client quotas: Kafka's precedence of user/client-id entities, its rate measurement and
throttle time, DescribeClientQuotas' filters, and durability."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.broker.security.quotas import (
    CLIENT_ID,
    USER,
    ClientQuotas,
    QuotaError,
    RateSensor,
    entity,
    matches,
)

P = "producer_byte_rate"


def test_precedence_follows_kafka() -> None:
    q = ClientQuotas(None)
    q.alter([(entity([(CLIENT_ID, None)]), [(P, 1.0)]), (entity([(CLIENT_ID, "c")]), [(P, 2.0)]),
             (entity([(USER, None)]), [(P, 3.0)]), (entity([(USER, None), (CLIENT_ID, None)]), [(P, 4.0)]),
             (entity([(USER, None), (CLIENT_ID, "c")]), [(P, 5.0)]), (entity([(USER, "u")]), [(P, 6.0)]),
             (entity([(USER, "u"), (CLIENT_ID, None)]), [(P, 7.0)]),
             (entity([(CLIENT_ID, "c"), (USER, "u")]), [(P, 8.0)])])
    order = [((USER, "u"), (CLIENT_ID, "c")), ((USER, "u"), (CLIENT_ID, None)), ((USER, "u"),),
             ((USER, None), (CLIENT_ID, "c")), ((USER, None), (CLIENT_ID, None)), ((USER, None),),
             ((CLIENT_ID, "c"),), ((CLIENT_ID, None),)]
    expected = [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    for ent, value in zip(order, expected, strict=True):
        found = q.quota("u", "c", P)
        assert found is not None and found[0] == value
        q.alter([(ent, [(P, None)])])
    assert q.quota("u", "c", P) is None and not q.active


def test_who_shares_a_quota() -> None:
    q = ClientQuotas(None)
    q.alter([(entity([(USER, "u")]), [(P, 10.0)]), (entity([(CLIENT_ID, None)]), [(P, 10.0)])])
    # user u's quota is shared by all its clients; the client-id default is per client id
    assert q.quota("u", "a", P)[1] == q.quota("u", "b", P)[1] == ("u", "", P)  # type: ignore[index]
    assert q.quota("v", "a", P)[1] == ("", "a", P)  # type: ignore[index]
    assert q.quota("v", "b", P)[1] == ("", "b", P)  # type: ignore[index]


def test_rate_and_throttle_time_as_kafka_measures_them() -> None:
    sensor = RateSensor(samples=11, window_ms=1000)
    sensor.record(10_000, 0)
    # one sample so far: the window counts as 10 s (num-1 samples), 1000 B/s
    assert sensor.rate(0) == pytest.approx(1000)
    assert sensor.throttle_ms(500, 0) == 10_000  # (1000-500)/500 * 10 s
    assert sensor.throttle_ms(2000, 0) == 0
    sensor.record(10_000, 5_500)
    assert sensor.rate(5_500) == pytest.approx(20_000 / 10.5)  # 5.5 s elapsed, 5 full windows: 10.5 s
    # samples older than num windows are forgotten
    assert sensor.rate(30_000) == 0


def test_a_client_over_its_quota_owes_time_and_others_do_not() -> None:
    q = ClientQuotas(None, samples=2, window_s=1)
    q.alter([(entity([(CLIENT_ID, "noisy")]), [(P, 1000.0)])])
    assert q.record("ANONYMOUS", "noisy", P, 500, 0) == 0
    # 3000 B in a window counted as 1.1 s: (2727 - 1000) / 1000 * 1.1 s
    assert q.record("ANONYMOUS", "noisy", P, 2500, 100) == 1900
    assert q.record("ANONYMOUS", "quiet", P, 10**9, 100) == 0
    # one throttle is bounded: the sampled span for byte rates, one window for requests
    assert q.record("ANONYMOUS", "noisy", P, 10**9, 200) == 2000
    q.alter([(entity([(CLIENT_ID, "noisy")]), [("request_percentage", 1.0)])])
    assert q.record("ANONYMOUS", "noisy", "request_percentage", 500.0, 300) == 1000


def test_describe_filters() -> None:
    u, uc, c, d = (entity([(USER, "u")]), entity([(USER, "u"), (CLIENT_ID, "c")]), entity([(CLIENT_ID, "c")]),
                   entity([(CLIENT_ID, None)]))
    assert matches(u, {USER: (0, "u")}, strict=False) and matches(uc, {USER: (0, "u")}, strict=False)
    assert not matches(uc, {USER: (0, "u")}, strict=True)
    assert matches(d, {CLIENT_ID: (1, None)}, strict=True) and not matches(c, {CLIENT_ID: (1, None)}, strict=True)
    assert matches(c, {CLIENT_ID: (2, None)}, strict=True) and not matches(d, {CLIENT_ID: (2, None)}, strict=True)
    assert matches(d, {}, strict=False) and not matches(d, {}, strict=True)


def test_bad_entities_and_keys() -> None:
    for components in ([("ip", "1.2.3.4")], [(USER, "a"), (USER, "b")], [], [(USER, "")]):
        with pytest.raises(QuotaError):
            entity(components)
    with pytest.raises(QuotaError):
        ClientQuotas.check([("producer_rate", 1.0)])
    with pytest.raises(QuotaError):
        ClientQuotas.check([(P, -5.0)])


def test_quotas_are_durable(tmp_path: Path) -> None:
    q = ClientQuotas(tmp_path)
    q.alter([(entity([(USER, None), (CLIENT_ID, "c")]), [(P, 5.0), ("request_percentage", 50.0)])])
    again = ClientQuotas(tmp_path)
    again.load()
    assert again.entries == {((USER, None), (CLIENT_ID, "c")): {P: 5.0, "request_percentage": 50.0}}
