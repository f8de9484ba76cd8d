"""Retries with backoff and tolerance, driven with an injected clock (no broker)."""

from __future__ import annotations

import asyncio

import pytest

from streamkit.connect.config import CommonConfig
from streamkit.connect.errors import RetriableError
from streamkit.connect.tolerance import ErrorHandler, Stage, error_headers


def handler(**config: str) -> tuple[ErrorHandler, list[float]]:
    now = [0.0]
    common = CommonConfig.model_validate({"name": "c", "connector.class": "X", **config})
    return ErrorHandler(common, "c", 0, clock=lambda: now[0]), now


def test_backoff_doubles_up_to_the_cap() -> None:
    errors, _ = handler(**{"errors.retry.delay.max.ms": "1000"})
    assert [errors.backoff_ms(i) for i in range(5)] == [300, 600, 1000, 1000, 1000]


async def test_retry_until_success() -> None:
    errors, _clock = handler(**{"errors.retry.delay.max.ms": "1"})
    calls = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise RetriableError("not yet")
        return "done"

    assert await errors.retry(flaky, Stage.TASK_PUT, always=True) == "done"
    assert len(calls) == 4


async def test_retry_gives_up_after_the_timeout() -> None:
    errors, now = handler(**{"errors.retry.timeout": "1000", "errors.retry.delay.max.ms": "1"})
    calls = []

    async def failing() -> None:
        calls.append(1)
        now[0] += 0.4  # each attempt takes 400 ms of the budget
        raise RetriableError("still down")

    with pytest.raises(RetriableError):
        await errors.retry(failing, Stage.TASK_PUT)
    assert len(calls) == 3


async def test_a_stop_ends_the_backoff_and_the_retries() -> None:
    stop = asyncio.Event()
    common = CommonConfig.model_validate({"name": "c", "connector.class": "X", "errors.retry.delay.max.ms": "600000"})
    errors = ErrorHandler(common, "c", 0, stop=stop)
    calls = []

    async def failing() -> None:
        calls.append(1)
        stop.set()  # the task is deleted while this attempt runs
        raise RetriableError("down")

    with pytest.raises(RetriableError):
        # without the stop, the retries (always, no budget) would go on for ever
        await asyncio.wait_for(errors.retry(failing, Stage.TASK_POLL, always=True), 60)
    assert len(calls) == 1


async def test_no_retry_budget_means_one_attempt_for_conversions() -> None:
    errors, _ = handler()
    calls = []

    async def failing() -> None:
        calls.append(1)
        raise RetriableError("down")

    with pytest.raises(RetriableError):
        await errors.retry(failing, Stage.VALUE_CONVERTER)
    assert len(calls) == 1


def test_tolerance() -> None:
    assert not handler()[0].tolerate(Stage.VALUE_CONVERTER, ValueError("x"))
    tolerant, _ = handler(**{"errors.tolerance": "all"})
    assert tolerant.tolerate(Stage.VALUE_CONVERTER, ValueError("x"))
    assert tolerant.tolerated == 1


def test_error_headers_are_kafka_connects() -> None:
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        headers = dict(error_headers(topic="t", partition=2, offset=9, connector="c", task_id=1,
                                     stage=Stage.TRANSFORMATION, executing=ErrorHandler, error=exc))
    assert headers["__connect.errors.topic"] == b"t"
    assert headers["__connect.errors.partition"] == b"2"
    assert headers["__connect.errors.offset"] == b"9"
    assert headers["__connect.errors.stage"] == b"TRANSFORMATION"
    assert headers["__connect.errors.class.name"] == b"streamkit.connect.tolerance.ErrorHandler"
    assert headers["__connect.errors.exception.class.name"] == b"builtins.ValueError"
    assert headers["__connect.errors.exception.message"] == b"bad value"
    assert b"ValueError: bad value" in headers["__connect.errors.exception.stacktrace"]
