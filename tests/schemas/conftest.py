"""One real broker and one ``streamkit schema-registry`` process per module, both child
processes on free ports; tests use distinct subjects so they share them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from streamkit.testing import BrokerProcess, SchemaRegistryProcess

_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def registry(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistryProcess]:
    log_file = tmp_path_factory.mktemp("registry") / "registry.log"
    with SchemaRegistryProcess(broker.bootstrap, log_file) as running:
        yield running


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    """A subject no other test of the module uses."""
    return f"{request.node.name.replace('[', '-').rstrip(']')}-{next(_names)}-value"
