"""Small Java programs using the real kafka-clients jar, compiled once per test session.

Sources live in `compat_tests/java/<Name>.java` (default package, class `Name` with a `main`).
The classpath is kafka-clients 3.9.1 with lz4-java, snappy-java, zstd-jni and slf4j-api, which
scripts/setup.sh fetches from Maven Central (reference/kafka-clients-3.9/pom.xml) into
`.cache/kafka-clients-3.9.1/lib` and lists in `.cache/java-classpath`.

    rc, out, err = java.run("Smoke")                 # the session fixture `java`
    rc, out, err = java.run("Produce", broker.bootstrap, topic, "100", timeout=60)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[1]
JAVA_DIR = Path(__file__).resolve().parent / "java"
CLASSPATH_FILE = REPO_ROOT / ".cache" / "java-classpath"
MAVEN_LIB = REPO_ROOT / ".cache" / "kafka-clients-3.9.1" / "lib"
REQUIRED_JARS = ("kafka-clients", "lz4-java", "snappy-java", "zstd-jni")
OPTIONAL_JARS = ("slf4j-api",)
# Short-lived client programs on a 2-core machine: fast start-up beats peak throughput.
DEFAULT_JVM_ARGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m")


class JavaError(RuntimeError):
    """javac or java is missing, the jars cannot be found, or a program failed to compile."""


class JavaTimeout(AssertionError):
    """A Java program ran past its timeout; it has been killed. Carries what it printed."""

    def __init__(self, message: str, stdout: str, stderr: str) -> None:
        super().__init__(f"{message}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")
        self.stdout = stdout
        self.stderr = stderr


class JavaResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def _from_file(path: Path) -> list[Path] | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    jars = [Path(p) for p in text.split(os.pathsep) if p]
    return jars if all(jar.is_file() for jar in jars) and _complete(jars) else None


def _complete(jars: Sequence[Path]) -> bool:
    """Whether every required artifact is there (Maven's `<artifact>-<version>.jar` names)."""
    return all(any(j.stem.startswith(f"{n}-") for j in jars) for n in REQUIRED_JARS)


def _from_maven_lib() -> list[Path] | None:
    jars = sorted(MAVEN_LIB.glob("*.jar")) if MAVEN_LIB.is_dir() else []
    return jars if _complete(jars) else None


def find_classpath() -> list[Path]:
    """The kafka-clients jar and the jars it needs at run time, as paths."""
    for finder in (lambda: _from_file(CLASSPATH_FILE), _from_maven_lib):
        jars = finder()
        if jars:
            return jars
    raise JavaError(
        f"kafka-clients jar not found: no usable {CLASSPATH_FILE} or {MAVEN_LIB}; "
        "run `bash scripts/setup.sh`"
    )


def kafka_lib_classpath(version: str = "4.4.0") -> list[Path]:
    """kafka-clients `version` and the jars it needs at run time, from the Maven-fetched
    `.cache/kafka-<version>/lib` of scripts/setup.sh (reference/kafka-*/pom.xml)."""
    lib = REPO_ROOT / ".cache" / f"kafka-{version}" / "lib"
    jars = sorted(lib.glob("*.jar")) if lib.is_dir() else []
    wanted = [f"kafka-clients-{version}", *REQUIRED_JARS[1:], *OPTIONAL_JARS]
    picked = [j for j in jars if any(j.stem.startswith(w) for w in wanted)]
    if not any(j.stem == f"kafka-clients-{version}" for j in picked):
        raise JavaError(f"kafka-clients {version} not found in {lib}; run `bash scripts/setup.sh`")
    return picked


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


class JavaPrograms:
    """Compiles `compat_tests/java/<Name>.java` on first use and runs it with the client jars."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        classpath: Sequence[Path] | None = None,
        *,
        source_dir: Path = JAVA_DIR,
        jvm_args: Sequence[str] = DEFAULT_JVM_ARGS,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.classpath = list(classpath) if classpath is not None else find_classpath()
        self.source_dir = source_dir
        self.jvm_args = tuple(jvm_args)
        self._compiled: dict[str, Path] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _tool(name: str) -> str:
        path = shutil.which(name)
        if path is None:
            raise JavaError(f"{name} not found on PATH; run `bash scripts/setup.sh`")
        return path

    def _cp(self, *extra: Path) -> str:
        return os.pathsep.join(str(p) for p in (*extra, *self.classpath))

    def compile(self, name: str, timeout: float = 180.0) -> Path:
        """Compile `<name>.java` (and the sources it uses) once; returns its class directory."""
        name = name.removesuffix(".java")
        with self._lock:
            if name in self._compiled:
                return self._compiled[name]
            source = self.source_dir / f"{name}.java"
            if not source.is_file():
                raise JavaError(f"no Java source {source}")
            classes = self.out_dir / name
            classes.mkdir(parents=True, exist_ok=True)
            cmd = [
                self._tool("javac"),
                "-encoding", "UTF-8",
                "-nowarn",
                "-d", str(classes),
                "-cp", self._cp(),
                "-sourcepath", str(self.source_dir),
                str(source),
            ]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                raise JavaError(f"javac {source.name} failed:\n{proc.stdout}{proc.stderr}")
            self._compiled[name] = classes
            return classes

    def run(
        self,
        name: str,
        *args: str,
        timeout: float = 120.0,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        jvm_args: Sequence[str] | None = None,
    ) -> JavaResult:
        """Run class `name` with `args`; returns (returncode, stdout, stderr).

        Raises JavaTimeout (with the output so far) if it runs longer than `timeout` seconds.
        """
        name = name.removesuffix(".java")
        classes = self.compile(name)
        cmd = [
            self._tool("java"),
            *(self.jvm_args if jvm_args is None else jvm_args),
            "-cp", self._cp(classes),
            name,
            *map(str, args),
        ]  # fmt: skip
        run_env = {**os.environ, **(env or {})}
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                env=run_env,
            )
        except subprocess.TimeoutExpired as exc:
            raise JavaTimeout(
                f"java {name} {' '.join(map(str, args))} ran past {timeout}s and was killed",
                _text(exc.stdout),
                _text(exc.stderr),
            ) from None
        return JavaResult(proc.returncode, proc.stdout, proc.stderr)
