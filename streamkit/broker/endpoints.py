"""Kafka's address settings, parsed and checked: ``listeners`` / ``advertised.listeners``
with ``listener.security.protocol.map``, and ``zookeeper.connect``.

Pure functions from setting text to values; each bad value raises ConfigError naming the
setting. Every listener's security protocol is served (streamkit.broker.security builds
its TLS and SASL settings).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import NamedTuple

from streamkit.log.errors import ConfigError

__all__ = ["DEFAULT_PROTOCOL_MAP", "SECURITY_PROTOCOLS", "Listener", "parse_listeners",
           "parse_protocol_map", "parse_zookeeper_connect"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default listener.security.protocol.map: each protocol is a listener name of its own.
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
_LISTENER = re.compile(r"^([A-Za-z0-9_-]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")
_ZK_SERVER = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:/\[\],]+):(\d+)$")


class Listener(NamedTuple):
    """One ``NAME://host:port`` entry. The name is upper case (Kafka normalises it); an
    empty host means every interface; port 0 means any free port."""

    name: str
    host: str
    port: int


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, each name once."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, protocol = (s.strip().upper() for s in item.partition(":"))
        if not sep or not name:
            raise ConfigError(f"invalid listener.security.protocol.map entry {item!r}: expected NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid security protocol {protocol!r} in listener.security.protocol.map "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in out:
            raise ConfigError(f"listener.security.protocol.map names {name} twice")
        out[name] = protocol
    return out


def parse_listeners(text: str, setting: str, protocols: Mapping[str, str], controllers: set[str],
                    distinct_ports: bool = True) -> tuple[Listener, ...]:
    """The broker listeners of a ``listeners`` or ``advertised.listeners`` value, in order.

    KRaft controller listeners (``controller.listener.names``) are checked for form and left
    out. As in Kafka, names are unique, and in ``listeners`` so are non-zero ports unless one
    host is an IPv4 and the other an IPv6 address."""
    out: list[Listener] = []
    seen: set[str] = set()
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None or int(m.group(3)) > 65535:
            raise ConfigError(f"invalid {setting} entry {item!r}: expected NAME://host:port")
        name = m.group(1).upper()
        if name in seen:
            raise ConfigError(f"{setting} names listener {name} twice")
        seen.add(name)
        if name in controllers:
            continue
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(f"{setting}: listener {name} has no security protocol; map it in "
                              f"listener.security.protocol.map (e.g. {name}:PLAINTEXT)")
        out.append(Listener(name, m.group(2).strip("[]"), int(m.group(3))))
    if distinct_ports:
        _check_ports(out, setting)
    return tuple(out)


def _check_ports(listeners: list[Listener], setting: str) -> None:
    by_port: dict[int, list[Listener]] = {}
    for listener in listeners:
        if listener.port != 0:  # port 0: each binds a free port of its own
            by_port.setdefault(listener.port, []).append(listener)
    for port, same in by_port.items():
        if len(same) > 1 and sorted(_ip_version(x.host) for x in same) != [4, 6]:
            raise ConfigError(f"{setting}: listeners {', '.join(x.name for x in same)} share port {port}; "
                              "ports must differ unless one host is IPv4 and the other IPv6")


def _ip_version(host: str) -> int:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return 0


def parse_zookeeper_connect(text: str) -> tuple[tuple[tuple[str, int], ...], str]:
    """``zookeeper.connect``: ``host:port[,host:port...][/chroot]`` -> (servers, chroot).

    The chroot follows ZooKeeper's path rules (absolute, no empty, ``.`` or ``..`` segment,
    no trailing slash); ``/`` alone or none gives ``""``."""
    text = text.strip()
    slash = text.find("/")
    servers_text, chroot = (text, "") if slash < 0 else (text[:slash], text[slash:])
    servers: list[tuple[str, int]] = []
    for item in (i.strip() for i in servers_text.split(",")):
        m = _ZK_SERVER.match(item)
        if m is None or not 1 <= int(m.group(2)) <= 65535:
            raise ConfigError(f"invalid zookeeper.connect {text!r}: {item!r} is not host:port "
                              "(expected host:port[,host:port...][/chroot])")
        servers.append((m.group(1).strip("[]"), int(m.group(2))))
    if chroot == "/":
        chroot = ""
    segments = chroot.split("/")[1:]
    if chroot and any(s in ("", ".", "..") or "\0" in s for s in segments):
        raise ConfigError(f"invalid zookeeper.connect {text!r}: chroot {chroot!r} is not a ZooKeeper path "
                          "(/name[/name...], no empty, '.' or '..' part, no trailing '/')")
    return tuple(servers), chroot
