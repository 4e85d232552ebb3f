"""Regenerate odradek/broker/kafka_keys.py: the names of every broker config Kafka defines.

    python scripts/kafka_broker_keys.py KAFKA_GIT_DIR REV [KAFKA_GIT_DIR REV ...] \\
        > odradek/broker/kafka_keys.py

Each KAFKA_GIT_DIR is a clone of apache/kafka or a fork carrying its tags (a bare one will do:
files are read with `git show`); the names of every REV given are merged, so that a key of the
last 3.x (ZooKeeper) line and one of the 4.x line are both Kafka's. The names are the
`define(...)` calls of the ConfigDefs that AbstractKafkaConfig.CONFIG_DEF (the broker's whole
ConfigDef, KafkaConfig's) merges, with their constants resolved the way javac would: string
literals, constants of any class, `+` and ServerTopicConfigSynonyms.serverSynonym.
"""

from __future__ import annotations

import re
import subprocess
import sys

MERGED = "server/src/main/java/org/apache/kafka/server/config/AbstractKafkaConfig.java"
MODULES = (
    "clients",
    "server",
    "server-common",
    "storage",
    "group-coordinator",
    "transaction-coordinator",
    "raft",
    "metadata",
    "share-coordinator",
    "coordinator-common",
)


def git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True
    ).stdout


def java_sources(repo: str, rev: str) -> dict[str, str]:
    """Simple class name -> source, for the main sources of the broker's modules."""
    names = git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()
    out = {}
    for path in names:
        if path.endswith(".java") and "/src/main/" in path and path.split("/")[0] in MODULES:
            out.setdefault(path.rsplit("/", 1)[1][:-5], path)
    return out


def split_top(expr: str, sep: str) -> list[str]:
    """Split at `sep` outside string literals and brackets."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(expr):
        c = expr[i]
        if c == '"':
            j = i + 1
            while expr[j] != '"':
                j += 2 if expr[j] == "\\" else 1
            cur.append(expr[i : j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def statement_end(text: str, start: int) -> int:
    """Index of the `;` ending the statement that starts at `start`."""
    depth, i = 0, start
    while True:
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth == 0:
            return i
        elif c == "/" and text[i + 1] == "/":
            i = text.index("\n", i)
        i += 1


class Resolver:
    def __init__(self, repo: str, rev: str) -> None:
        self.repo, self.rev = repo, rev
        self.paths = java_sources(repo, rev)
        self.texts: dict[str, str] = {}
        self.synonyms: dict[str, str] | None = None

    def text(self, cls: str) -> str:
        if cls not in self.texts:
            raw = git(self.repo, "show", f"{self.rev}:{self.paths[cls]}")
            self.texts[cls] = re.sub(r"/\*.*?\*/", "", raw, flags=re.S)
        return self.texts[cls]

    def constant(self, cls: str, name: str) -> str:
        text = self.text(cls)
        m = re.search(rf"\bString\s+{name}\s*=", text)
        if m is None:
            for imp in re.findall(rf"import static [\w.]+\.(\w+)\.{name};", text):
                return self.constant(imp, name)
            raise KeyError(f"{cls}.{name}")
        return self.eval(cls, text[m.end() : statement_end(text, m.end())])

    def eval(self, cls: str, expr: str) -> str:
        out = []
        for term in split_top(expr.strip(), "+"):
            if term.startswith('"'):
                out.append(term[1:-1].encode().decode("unicode_escape"))
            elif m := re.fullmatch(r"(?:ServerTopicConfigSynonyms\.)?serverSynonym\((.*)\)", term):
                out.append(self.server_synonym(self.eval(cls, m.group(1))))
            elif m := re.fullmatch(r"(\w+)\.(\w+)", term):
                out.append(self.constant(m.group(1), m.group(2)))
            elif re.fullmatch(r"\w+", term):
                out.append(self.constant(cls, term))
            elif term.startswith("(") and term.endswith(")"):
                out.append(self.eval(cls, term[1:-1]))
            else:
                raise ValueError(f"{cls}: cannot evaluate {term!r}")
        return "".join(out)

    def server_synonym(self, topic_key: str) -> str:
        """ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS: a topic key's first broker key."""
        if self.synonyms is None:
            cls = "ServerTopicConfigSynonyms"
            text = self.text(cls)
            self.synonyms = {}
            start = text.index("ALL_TOPIC_CONFIG_SYNONYMS")
            block = text[start : statement_end(text, start)]
            entry = re.compile(
                r"\b(sameName\w*|single\w*|listWithLogPrefix)\(([^()]*(?:\([^()]*\)[^()]*)*)\)"
            )
            for kind, args in entry.findall(block):
                parts = split_top(args, ",")
                key = self.eval(cls, parts[0])
                prefix = "log.cleaner." if "Cleaner" in kind else "log." if "Log" in kind else ""
                if kind.startswith("sameName"):
                    name = key
                elif kind == "listWithLogPrefix":
                    name = re.fullmatch(r'new ConfigSynonym\("([^"]+)".*\)', parts[1]).group(1)
                else:
                    name = self.eval(cls, parts[1])
                self.synonyms[key] = prefix + name
        return self.synonyms[topic_key]

    def defines(self, cls: str, field: str) -> list[str]:
        """First arguments of the `define(...)` calls building `cls.field` (or `cls.field()`)."""
        text = self.text(cls)
        m = re.search(rf"\b{field}\s*=", text) or re.search(rf"\b{field}\(\)\s*\{{", text)
        if m is None:
            raise KeyError(f"{cls}.{field}")
        if text[m.end() - 1] == "{":
            depth, i = 1, m.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            block = text[m.end() : i]
        else:
            block = text[m.end() : statement_end(text, m.end())]
        names = []
        for d in re.finditer(r"\bdefine(?:Internal)?\(", block):
            args = block[d.end() : statement_end(block + ";", d.end() - 1)]
            first = split_top(args, ",")[0]
            names.append(self.eval(cls, first))
        return names


def broker_keys(repo: str, rev: str) -> set[str]:
    r = Resolver(repo, rev)
    merged = re.sub(r"/\*.*?\*/", "", git(repo, "show", f"{rev}:{MERGED}"), flags=re.S)
    start = merged.index("CONFIG_DEF =")
    body = merged[start : statement_end(merged, start)]
    names: set[str] = set()
    for cls, field in re.findall(r"(\w+)\.(\w+?)(?:\(\))?\s*[,)]", body):
        if cls in ("Arrays", "Utils", "List"):
            continue
        names.update(r.defines(cls, field))
    return names


def main(*pairs: str) -> None:
    if not pairs or len(pairs) % 2:
        raise SystemExit(__doc__)
    names: set[str] = set()
    sources = []
    for repo, rev in zip(pairs[::2], pairs[1::2], strict=True):
        names |= broker_keys(repo, rev)
        described = git(repo, "describe", "--tags", "--always", rev).strip()
        sources.append(f"{described} ({git(repo, 'rev-parse', rev).strip()[:12]})")
    print('"""Every broker config name Kafka defines (its KafkaConfig ConfigDef), generated by')
    print("scripts/kafka_broker_keys.py from apache/kafka " + " and ".join(sources) + ".")
    print("")
    print("A key here that odradek's BROKER_KEYS lacks is Kafka's but has no effect in odradek:")
    print("it is accepted with a warning. Any other unknown key is a typo and an error.")
    print('"""')
    print("")
    print("KAFKA_BROKER_KEYS: frozenset[str] = frozenset(")
    print("    {")
    for name in sorted(names):
        print(f'        "{name}",')
    print("    }")
    print(")")


if __name__ == "__main__":
    main(*sys.argv[1:])
