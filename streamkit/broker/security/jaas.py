"""Kafka's ``sasl.jaas.config`` line: ``LoginModule flag key=value ... ;``

For example ``org.apache.kafka.common.security.plain.PlainLoginModule required
username="admin" password="admin-secret" user_alice="alice-secret";``. Values may be quoted
(with backslash escapes inside quotes) or bare; the trailing ``;`` is required, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from streamkit.log.errors import ConfigError

__all__ = ["JaasEntry", "parse_jaas"]

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*([A-Za-z0-9_.$-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')
_HEAD = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+([A-Za-z]+)")


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_NAME="password"`` options: name -> password."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse_jaas(text: str, setting: str) -> JaasEntry:
    """One login module entry; ConfigError naming ``setting`` when it is not Kafka's form."""
    head = _HEAD.match(text)
    if head is None or head.group(2).lower() not in _FLAGS:
        raise ConfigError(f"invalid {setting}: expected 'LoginModuleClass required key=\"value\" ...;'")
    pos = head.end()
    options: dict[str, str] = {}
    while (m := _TOKEN.match(text, pos)) is not None:
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[m.group(1)] = value
        pos = m.end()
    if text[pos:].strip() != ";":
        raise ConfigError(f"invalid {setting}: cannot read {text[pos:].strip()[:30]!r} (each option is "
                          "key=\"value\" and the line ends with ';')")
    return JaasEntry(head.group(1), head.group(2).lower(), options)
