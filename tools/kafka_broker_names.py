"""Write streamkit/broker/kafka_names.py: every broker setting name of Apache Kafka, read
from Kafka's own Java sources at the given release tags.

    python tools/kafka_broker_names.py GIT_DIR 3.9.1 4.0.0 4.1.1 4.2.0-rc1 \
        > streamkit/broker/kafka_names.py

GIT_DIR is a clone of apache/kafka (a bare one will do) holding those tags. For each tag the
script reads ``AbstractKafkaConfig.CONFIG_DEF`` (the merged ConfigDef that KafkaConfig
validates server.properties with), follows each ConfigDef it merges to its class, and takes
the name and type of every ``define``/``defineInternal`` in it. It adds the names Kafka reads
outside that ConfigDef: the broker-level dynamic configs (``QuotaConfig.brokerQuotaConfigs``:
the replication throttle rates) and the settings of Kafka's own authorizers (StandardAuthorizer;
the ZooKeeper-mode AclAuthorizer's ``authorizer.zookeeper.*``). Names that only the 3.x tags
have (ZooKeeper mode, and the settings Kafka 4 removed) are written to a second table.

Only the subset of Java that those files use is understood: string constants built from
literals, other constants and ``+``, and ``ServerTopicConfigSynonyms.serverSynonym``. Anything
else stops the script with the expression it could not read.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

_CONSTANT = re.compile(r"\bstatic\s+final\s+String\s+(\w+)\s*=\s*")
_IMPORT = re.compile(r"^import\s+(static\s+)?([\w.]+)(\.\*)?\s*;", re.M)
_PACKAGE = re.compile(r"^package\s+([\w.]+)\s*;", re.M)
_DEFINE = re.compile(r"\.define(?:Internal)?\s*\(")
_MERGED = re.compile(r"(\w+)\.(\w+)(\(\))?")
_AUTHORIZER_PREFIXED = re.compile(r'configPrefix\}(zookeeper\.[\w.]+)"')


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True).stdout


def _strip_comments(src: str) -> str:
    """The source with comments blanked, string and char literals kept."""
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c in "\"'":
            j = _literal_end(src, i)
            out.append(src[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _literal_end(src: str, i: int) -> int:
    quote, j = src[i], i + 1
    while src[j] != quote:
        j += 2 if src[j] == "\\" else 1
    return j + 1


def _balanced(src: str, start: int, stop: str) -> str:
    """Text from ``start`` up to the first ``stop`` character at bracket depth 0."""
    depth, i = 0, start
    while True:
        c = src[i]
        if c in "\"'":
            i = _literal_end(src, i)
            continue
        if c in stop and depth == 0:
            return src[start:i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        i += 1


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = _literal_end(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


@dataclass
class JavaFile:
    package: str
    source: str
    constants: dict[str, str]
    classes: dict[str, str]  # simple name -> fully qualified, from imports
    static_members: dict[str, str]  # member -> fully qualified class
    static_wildcards: list[str] = field(default_factory=list)


class Source:
    """The Java files of one Kafka tag, parsed on demand."""

    def __init__(self, git_dir: str, ref: str) -> None:
        self.git_dir, self.ref = git_dir, ref
        self.paths: dict[str, str] = {}
        for path in _git(git_dir, "ls-tree", "-r", "--name-only", ref).splitlines():
            if "/src/main/java/" in path and path.endswith(".java"):
                fq = path.split("/src/main/java/", 1)[1][: -len(".java")].replace("/", ".")
                self.paths[fq] = path
        self.files: dict[str, JavaFile] = {}

    def path(self, suffix: str) -> str:
        return next(p for fq, p in self.paths.items() if fq.endswith("." + suffix))

    def file(self, fq: str) -> JavaFile:
        if fq not in self.files:
            src = _strip_comments(_git(self.git_dir, "show", f"{self.ref}:{self.paths[fq]}"))
            package = _PACKAGE.search(src)
            constants = {m.group(1): _balanced(src, m.end(), ";") for m in _CONSTANT.finditer(src)}
            parsed = JavaFile(package.group(1) if package else "", src, constants, {}, {})
            for m in _IMPORT.finditer(src):
                is_static, name, wildcard = m.group(1), m.group(2), m.group(3)
                if is_static and wildcard:
                    parsed.static_wildcards.append(name)
                elif is_static:
                    owner, _, member = name.rpartition(".")
                    parsed.static_members[member] = owner
                elif not wildcard:
                    parsed.classes[name.rpartition(".")[2]] = name
            self.files[fq] = parsed
        return self.files[fq]

    def class_of(self, context: str, simple: str) -> str:
        here = self.file(context)
        for fq in (here.classes.get(simple), f"{here.package}.{simple}", f"{context}.{simple}"):
            if fq and fq in self.paths:
                return fq
        raise LookupError(f"{self.ref}: class {simple} from {context}")

    def constant(self, fq: str, name: str) -> str:
        here = self.file(fq)
        if name in here.constants:
            return self.evaluate(fq, here.constants[name])
        owner = here.static_members.get(name)
        if owner is not None:
            return self.constant(owner, name)
        for owner in here.static_wildcards:
            if owner in self.paths and name in self.file(owner).constants:
                return self.constant(owner, name)
        raise LookupError(f"{self.ref}: constant {name} in {fq}")

    def evaluate(self, fq: str, expression: str) -> str:
        """A String constant expression: literals, constants and ``+``."""
        out = []
        for term in _split_top(expression, "+"):
            if term.startswith('"'):
                out.append(term[1:-1].encode().decode("unicode_escape"))
            elif m := re.fullmatch(r"ServerTopicConfigSynonyms\.serverSynonym\((.+)\)", term):
                out.append(self.server_synonym(self.evaluate(fq, m.group(1))))
            elif re.fullmatch(r"[A-Za-z_][\w.]*", term):
                owner, _, name = term.rpartition(".")
                out.append(self.constant(self.class_of(fq, owner) if owner else fq, name))
            else:
                raise ValueError(f"{self.ref}: cannot evaluate {term!r} in {fq}")
        return "".join(out)

    def server_synonym(self, topic_name: str) -> str:
        """ServerTopicConfigSynonyms.serverSynonym: the first broker name of a topic config."""
        fq = next(fq for fq in self.paths if fq.endswith(".ServerTopicConfigSynonyms"))
        src = self.file(fq).source
        table = _balanced(src, src.index("ALL_TOPIC_CONFIG_SYNONYMS"), ";")
        table = table[table.index("mkMap(") + len("mkMap("):]
        prefixes = {"": "", "WithLogPrefix": "log.", "WithLogCleanerPrefix": "log.cleaner."}
        for entry in _split_top(table.rsplit(")", 2)[0], ","):
            m = re.fullmatch(r"(sameName|single|list)(\w*)\((.*)\)", entry, re.S)
            if m is None:
                raise ValueError(f"{self.ref}: synonym entry {entry!r}")
            kind, prefix, args = m.group(1), prefixes[m.group(2)], _split_top(m.group(3), ",")
            if self.evaluate(fq, args[0]) != topic_name:
                continue
            if kind == "sameName":
                return prefix + topic_name
            first = args[1]
            if kind == "list":
                first = _split_top(first[first.index("(") + 1 : first.rindex(")")], ",")[0]
            return prefix + self.evaluate(fq, first)
        raise LookupError(f"{self.ref}: no server synonym for {topic_name}")

    def defines(self, fq: str, member: str, method: bool) -> dict[str, str]:
        """name -> Kafka type of every define in ``fq``'s ConfigDef ``member``."""
        src = self.file(fq).source
        if method:
            start = re.search(rf"\bConfigDef\s+{member}\s*\(\s*\)\s*\{{", src)
            assert start is not None, f"{fq}.{member}()"
            body = _balanced(src, start.end(), "}")
        else:
            start = re.search(rf"\b{member}\s*=\s*", src)
            assert start is not None, f"{fq}.{member}"
            body = _balanced(src, start.end(), ";")
        out = {}
        for m in _DEFINE.finditer(body):
            args = _split_top(_balanced(body, m.end(), ")"), ",")
            kind = args[1].rpartition(".")[2].lower()
            out[self.evaluate(fq, args[0])] = kind
        return out

    def broker_configs(self) -> dict[str, str]:
        fq = next(fq for fq in self.paths if fq.endswith(".AbstractKafkaConfig"))
        src = self.file(fq).source
        merged = _balanced(src, src.index("mergeConfigs(") + len("mergeConfigs("), ")")
        merged = merged[merged.index("(") + 1 : merged.rindex(")")]
        names: dict[str, str] = {}
        for item in _split_top(merged, ","):
            m = _MERGED.fullmatch(item)
            assert m is not None, item
            names.update(self.defines(self.class_of(fq, m.group(1)), m.group(2), bool(m.group(3))))
        quota = next(fq for fq in self.paths if re.search(r"\.QuotaConfigs?$", fq))
        names.update(self.defines(quota, "brokerQuotaConfigs", True))
        return names | self.authorizer_configs()

    def authorizer_configs(self) -> dict[str, str]:
        out: dict[str, str] = {}
        standard = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        if standard in self.paths:
            out[self.constant(standard, "SUPER_USERS_CONFIG")] = "string"
            out[self.constant(standard, "ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG")] = "boolean"
        acl = "core/src/main/scala/kafka/security/authorizer/AclAuthorizer.scala"
        try:
            scala = _git(self.git_dir, "show", f"{self.ref}:{acl}")
        except subprocess.CalledProcessError:
            return out
        for name in _AUTHORIZER_PREFIXED.findall(scala):
            out["authorizer." + name] = "string"
        # AclAuthorizer's own ZooKeeper client takes ZkConfigs' TLS settings under "authorizer.".
        zk = next(fq for fq in self.paths if fq.endswith(".ZkConfigs"))
        types = self.defines(zk, "CONFIG_DEF", False)
        for constant in re.findall(r"zkSslConfigToSystemPropertyMap\.put\((\w+),", self.file(zk).source):
            name = self.constant(zk, constant)
            out["authorizer." + name] = types[name]
        return out


def _table(name: str, doc: str, configs: dict[str, str]) -> list[str]:
    lines = [f"# {doc}", f"{name}: dict[str, str] = {{"]
    lines += [f'    "{key}": "{configs[key]}",' for key in sorted(configs)]
    return [*lines, "}", ""]


def main(git_dir: str, refs: list[str]) -> None:
    by_ref = {ref: Source(git_dir, ref).broker_configs() for ref in refs}
    kafka4: dict[str, str] = {}
    kafka3: dict[str, str] = {}
    for ref, configs in by_ref.items():
        (kafka4 if ref.startswith("4.") else kafka3).update(configs)
    removed = {k: v for k, v in kafka3.items() if k not in kafka4}
    about = textwrap.fill(
        f"Produced by ``python tools/kafka_broker_names.py GIT_DIR {' '.join(refs)}`` from "
        f"Apache Kafka's sources at the release tags {', '.join(refs)}: every name the broker's "
        "merged ConfigDef (``AbstractKafkaConfig.CONFIG_DEF``) defines, the broker-level dynamic "
        "configs (``QuotaConfig.brokerQuotaConfigs``) and the settings of Kafka's own authorizers. "
        "``KAFKA3_BROKER_CONFIGS`` holds the names only 3.x has: ZooKeeper mode and what Kafka 4 "
        "removed. Kafka's dynamic names (``listener.name.NAME.*``, ``config.providers.*``, plugin "
        "prefixes) are matched in streamkit.broker.config.", width=95)
    print(f'''"""Apache Kafka's broker setting names and their Kafka types (generated: do not edit).

{about}
"""

from __future__ import annotations

__all__ = ["KAFKA3_BROKER_CONFIGS", "KAFKA4_BROKER_CONFIGS", "KAFKA_BROKER_CONFIGS"]
''')
    print("\n".join(_table("KAFKA4_BROKER_CONFIGS", "Kafka 4 (" + ", ".join(
        r for r in refs if r.startswith("4.")) + ")", kafka4)))
    print("\n".join(_table("KAFKA3_BROKER_CONFIGS", "Kafka 3 only (" + ", ".join(
        r for r in refs if not r.startswith("4.")) + "): ZooKeeper mode and removed settings",
        removed)))
    print("KAFKA_BROKER_CONFIGS: dict[str, str] = {**KAFKA3_BROKER_CONFIGS, **KAFKA4_BROKER_CONFIGS}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
