"""Schema Registry serdes: streamkit's AvroSerde against confluent-kafka's AvroSerializer
and AvroDeserializer (both fastavro underneath), and the JSON model codec streamkit apps use
by default, on the same records in the same run.

A ``streamkit broker`` and a ``streamkit schema-registry`` run as child processes; each
serializer registers its schema once (untimed), then ``--records`` pydantic records (5
fields: long, string, double, boolean, optional string) are encoded and decoded in a loop.
Printed: records/s for each, and streamkit's rate as a ratio of confluent-kafka's (> 1:
faster) and of JSON's."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pydantic import BaseModel

from streamkit.schemas.serdes import AvroSerde
from streamkit.streams.codecs import ModelCodec
from streamkit.testing import BrokerProcess, SchemaRegistryProcess


class Reading(BaseModel):
    sensor: int
    site: str
    celsius: float
    ok: bool
    note: str | None = None


def _rate(n: int, fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def serde_rates(n: int, registry_url: str) -> dict[str, tuple[float, float]]:
    """(encode, decode) records/s of streamkit's AvroSerde, confluent-kafka's Avro serdes and
    the JSON model codec, on the same ``n`` records (schemas registered untimed)."""
    records = [Reading(sensor=i, site=f"site-{i % 50}", celsius=i / 7, ok=i % 3 != 0,
                       note=None if i % 2 else "calibrated") for i in range(n)]
    ours = AvroSerde(Reading, registry_url)
    ours.prepare("readings", is_key=False)
    sr = SchemaRegistryClient({"url": registry_url})
    ctx = SerializationContext("readings", MessageField.VALUE)
    theirs = AvroSerializer(sr, ours.schema_text(), to_dict=lambda r, _c: r.model_dump())
    their_reader = AvroDeserializer(sr, from_dict=lambda d, _c: Reading.model_validate(d))
    json_codec = ModelCodec(Reading)
    theirs(records[0], ctx)  # registers (untimed)
    ours.loads(ours.dumps(records[0]))  # fetches the writer schema once (untimed)

    encoded: dict[str, list[bytes]] = {}
    rates: dict[str, tuple[float, float]] = {}
    for name, dump, load in [
        ("streamkit AvroSerde", ours.dumps, ours.loads),
        ("confluent-kafka AvroSerializer", lambda r: theirs(r, ctx), lambda b: their_reader(b, ctx)),
        ("JSON (ModelCodec)", json_codec.dumps, json_codec.loads),
    ]:
        out: list[bytes] = []
        write = _rate(n, lambda dump=dump, out=out: out.extend(dump(r) for r in records))  # type: ignore[misc]
        read = _rate(n, lambda load=load, out=out: [load(b) for b in out])  # type: ignore[misc]
        encoded[name] = out
        rates[name] = (write, read)
    assert encoded["streamkit AvroSerde"][:100] == encoded["confluent-kafka AvroSerializer"][:100], \
        "both write the same bytes"
    return rates


def print_rates(n: int, rates: dict[str, tuple[float, float]]) -> None:
    print(f"{n:,} records")
    print(f"{'serde':34} {'encode rec/s':>14} {'decode rec/s':>14}")
    for name, (write, read) in rates.items():
        print(f"{name:34} {write:14,.0f} {read:14,.0f}")
    ours_w, ours_r = rates["streamkit AvroSerde"]
    for peer in ("confluent-kafka AvroSerializer", "JSON (ModelCodec)"):
        w, r = rates[peer]
        print(f"streamkit AvroSerde / {peer}: encode {ours_w / w:.2f}x, decode {ours_r / r:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "broker") as broker, \
            SchemaRegistryProcess(broker.bootstrap, Path(tmp) / "registry.log") as registry:
        rates = serde_rates(args.records, registry.url)
    print_rates(args.records, rates)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
