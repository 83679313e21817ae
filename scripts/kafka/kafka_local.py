"""A real single-node Apache Kafka 4.x broker for tests, CI and local runs, without Docker.

The broker's classpath is resolved from Maven Central by ``scripts/kafka/pom.xml`` (only package
registries are reachable on the project's machines, so there is no release tarball to fetch) and
cached in ``~/.cache/newsflow/kafka-<version>/libs`` (and ``~/.m2``): only the first run on a
machine downloads (~45 MB). Each broker gets fresh free ports on 127.0.0.1 and a fresh data dir,
so parallel sessions don't collide.

Python API::

    from newsflow.connectors.topics import create_topics  # topic creation lives in the package

    with KafkaBroker() as broker:
        create_topics(broker.bootstrap, ["raw-items"], partitions=2)
        ...

CLI::

    python scripts/kafka/kafka_local.py start [--port P] [--data-dir D] [--foreground]
    python scripts/kafka/kafka_local.py status | stop | logs

``start`` prints ``KAFKA_BOOTSTRAP=127.0.0.1:PORT`` once the broker answers a metadata request and
records pid, ports and dirs in a state file (``--state-file``, default
``~/.cache/newsflow/kafka.state.json``) that ``status``, ``logs`` and ``stop`` read.

Only the standard library and confluent_kafka are used. Environment overrides:
``NEWSFLOW_KAFKA_VERSION`` (default below), ``NEWSFLOW_KAFKA_LIBS`` (a ready directory of jars,
e.g. the ``libs/`` of an unpacked Kafka release; skips Maven), ``NEWSFLOW_CACHE_DIR``,
``JAVA_HOME``.

Differences from shared/notes/kafka-local.md found on the first real run (Kafka 4.1.2, Java 17):

* The notes' dynamic-quorum config formatted with ``--standalone`` works as written. We use a
  *static* quorum instead (``controller.quorum.voters=1@127.0.0.1:<cport>``, ``format`` without
  ``--standalone``): with a dynamic quorum the controller's endpoint is written into the metadata
  log at format time, so a persistent ``--data-dir`` could not be restarted on other ports; with
  static voters it can (format is then run with ``--ignore-formatted``).
* ``kafka.tools.StorageTool random-uuid`` costs a JVM start (~1 s); the cluster id is made in
  Python instead (Kafka's format: 16 random bytes, URL-safe base64, no padding, not starting
  with ``-``).
* Readiness: a TCP connect poll first, then an AdminClient metadata request. Polling with the
  AdminClient alone floods stderr with librdkafka "Connection refused" lines.
* Not in the notes: ~half of a warm start is JVM class loading (≈1.5-2 s for ``format``,
  ≈3-5 s for the broker on 2 busy cores). Both JVMs use an AppCDS archive made by their first
  run (see ``ClassDataSharing``; the first ``stop`` takes a few seconds longer to write it).
  Apache's own apache/kafka Docker image does the same (kafka.jsa, storage.jsa).
* Brokers started through the Python API die with the thread that started them
  (``PR_SET_PDEATHSIG``), so a SIGKILLed pytest leaves no broker behind; their temp dirs are
  swept by later starts. ``start`` from the CLI detaches (``stop`` ends it).
* Log4j2 prints "Unable to register Log4j shutdown hook" on SIGTERM unless its shutdown hook is
  disabled (``shutdownHook = disable`` in scripts/kafka/log4j2.properties).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_KAFKA_VERSION = "4.1.2"
DEFAULT_HEAP = "512m"
DEFAULT_STARTUP_TIMEOUT = 90.0
HOST = "127.0.0.1"

POM_PATH = Path(__file__).resolve().parent / "pom.xml"
LOG4J_CONFIG_PATH = POM_PATH.parent / "log4j2.properties"

# librdkafka logs through this logger; keep it quiet unless someone configures it.
_rdkafka_log = logging.getLogger("newsflow.kafka_local.rdkafka")
_rdkafka_log.addHandler(logging.NullHandler())
_rdkafka_log.propagate = False


class KafkaStartError(RuntimeError):
    """The broker could not be provisioned or did not become ready."""


# --------------------------------------------------------------------------- paths and jars


def cache_dir() -> Path:
    env = os.environ.get("NEWSFLOW_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "newsflow"


def default_state_file() -> Path:
    return cache_dir() / "kafka.state.json"


def kafka_version() -> str:
    return os.environ.get("NEWSFLOW_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def _run_checked(cmd: list[str], what: str, timeout: float) -> str:
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"{what} timed out after {timeout:.0f} s: {' '.join(cmd)}"
        raise KafkaStartError(msg) from exc
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        msg = f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}"
        raise KafkaStartError(msg)
    return proc.stdout


def ensure_jars(version: str | None = None, *, quiet: bool = False) -> Path:
    """Return a directory holding the broker's runtime jars, running Maven once if needed.

    The result is cached in ``<cache>/kafka-<version>/libs``; a ``.complete`` marker is written
    only after Maven succeeded, and a file lock serialises concurrent first runs.
    """
    env_libs = os.environ.get("NEWSFLOW_KAFKA_LIBS")
    if env_libs:
        libs = Path(env_libs).expanduser()
        if not any(libs.glob("kafka_2.13-*.jar")):
            msg = f"NEWSFLOW_KAFKA_LIBS={libs} holds no kafka_2.13-*.jar"
            raise KafkaStartError(msg)
        return libs

    version = version or kafka_version()
    base = cache_dir() / f"kafka-{version}"
    libs = base / "libs"
    marker = libs / ".complete"
    if marker.exists():
        return libs

    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():  # another process finished while we waited
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            msg = "Maven (mvn) is needed once to fetch the Kafka jars; install it or set NEWSFLOW_KAFKA_LIBS"
            raise KafkaStartError(msg)
        if not POM_PATH.exists():
            msg = f"{POM_PATH} not found (needs a source checkout) and NEWSFLOW_KAFKA_LIBS unset"
            raise KafkaStartError(msg)
        tmp = Path(tempfile.mkdtemp(prefix="libs-", dir=base))
        try:
            if not quiet:
                print(
                    f"kafka_local: resolving Kafka {version} jars with Maven ...", file=sys.stderr
                )
            _run_checked(
                [
                    mvn,
                    "-q",
                    "-B",
                    "-f",
                    str(POM_PATH),
                    "dependency:copy-dependencies",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={tmp}",
                    f"-Dkafka.version={version}",
                ],
                "mvn dependency:copy-dependencies",
                timeout=900,
            )
            if not any(tmp.glob(f"kafka_2.13-{version}.jar")):
                msg = f"Maven finished but kafka_2.13-{version}.jar is not in {tmp}"
                raise KafkaStartError(msg)
            (tmp / ".complete").write_text(f"{version}\n")
            tmp.chmod(0o755)  # mkdtemp makes it 0700
            if libs.exists():
                shutil.rmtree(libs)
            tmp.rename(libs)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return libs


def java_bin() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        msg = "java (17+) not found on PATH and JAVA_HOME unset"
        raise KafkaStartError(msg)
    return found


class ClassDataSharing:
    """JVM AppCDS archives that roughly halve the broker's and the format tool's start time.

    The first JVM of a kind dumps the classes it loaded (``-XX:ArchiveClassesAtExit``) into a
    temp file, renamed into place only after the JVM exited by itself; later JVMs map the archive
    (``-XX:SharedArchiveFile``). Archives are keyed by jar dir and java binary; an archive the
    JVM finds unusable is ignored by it (``-Xshare:auto``), never fatal.
    ``NEWSFLOW_KAFKA_CDS=0`` turns this off.
    """

    def __init__(self, libs: Path, java: str) -> None:
        import hashlib

        real = os.path.realpath(java)
        try:
            mtime = os.stat(real).st_mtime_ns
        except OSError:
            mtime = 0
        key = hashlib.sha1(f"{libs.resolve()}|{real}|{mtime}".encode()).hexdigest()[:16]
        self.dir = cache_dir() / "cds" / key
        self.enabled = os.environ.get("NEWSFLOW_KAFKA_CDS", "1") != "0"

    def flags(self, name: str) -> tuple[list[str], Path | None, Path | None]:
        """JVM flags for archive ``name``, plus (tmp, final) paths when this run dumps."""
        if not self.enabled:
            return [], None, None
        final = self.dir / f"{name}.jsa"
        if final.exists() and final.stat().st_size > 0:
            return (
                [f"-XX:SharedArchiveFile={final}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"],
                None,
                None,
            )
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            for old in self.dir.glob("*.tmp"):  # left by JVMs killed without a stop()
                if time.time() - old.stat().st_mtime > 3600:
                    old.unlink(missing_ok=True)
        except OSError:
            return [], None, None
        tmp = self.dir / f"{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        return (
            [f"-XX:ArchiveClassesAtExit={tmp}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"],
            tmp,
            final,
        )

    @staticmethod
    def commit(tmp: str | Path | None, final: str | Path | None, ok: bool) -> None:
        if tmp is None:
            return
        tmp = Path(tmp)
        with contextlib.suppress(OSError):
            if ok and final is not None and tmp.exists() and tmp.stat().st_size > 0:
                os.replace(tmp, final)
            else:
                tmp.unlink(missing_ok=True)


# --------------------------------------------------------------------------- helpers


def free_ports(n: int, host: str = HOST) -> list[int]:
    """``n`` distinct ports that were free a moment ago (the OS picks them)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def random_cluster_id() -> str:
    """Same format as Kafka's ``Uuid.randomUuid().toString()`` (avoids a JVM start)."""
    while True:
        raw = os.urandom(16)
        cid = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not cid.startswith("-") and raw != bytes(16):
            return cid


def _port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _admin(bootstrap: str, **extra: Any):
    from confluent_kafka.admin import AdminClient

    conf = {"bootstrap.servers": bootstrap, "logger": _rdkafka_log, **extra}
    return AdminClient(conf)


def metadata_ok(bootstrap: str, timeout: float = 5.0, cluster_id: str | None = None) -> bool:
    """True if a broker at ``bootstrap`` answers a metadata request (of ``cluster_id``, if given)."""
    host, _, port = bootstrap.rpartition(":")
    if not _port_open(host, int(port)):
        return False
    try:
        md = _admin(bootstrap).list_topics(timeout=timeout)
    except Exception:
        return False
    return bool(md.brokers) and (cluster_id is None or md.cluster_id == cluster_id)


def _pdeathsig_hook() -> Any:
    """A preexec_fn that makes Linux SIGTERM the broker when the thread that started it dies.

    ``prctl`` is looked up here, in the parent: the child (between fork and exec) only calls it,
    so it never takes the dynamic loader's lock that another thread may have held at fork time.
    """
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    sig = int(signal.SIGTERM)

    def hook() -> None:  # pragma: no cover - runs in the child
        prctl(1, sig, 0, 0, 0)  # PR_SET_PDEATHSIG

    return hook


TEMP_PREFIX = "newsflow-kafka-"


def sweep_stale_temp_dirs(min_age_s: float = 600.0) -> list[Path]:
    """Remove temp broker dirs left by killed sessions (no live process names their config).

    A broker whose starter was SIGKILLed is itself stopped (PR_SET_PDEATHSIG) but its temp dir
    stays; this runs at every start so such dirs don't pile up in /tmp.
    """
    tmp_root = Path(tempfile.gettempdir())
    candidates = [
        d
        for d in tmp_root.glob(TEMP_PREFIX + "*")
        if d.is_dir() and time.time() - d.stat().st_mtime > min_age_s
    ]
    if not candidates:
        return []
    in_use: set[str] = set()
    me = os.getpid()
    for proc in Path("/proc").glob("[0-9]*"):
        if proc.name == str(me):
            continue
        try:
            args = proc.joinpath("cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for a in args:
            if TEMP_PREFIX.encode() in a:
                in_use.add(a.decode(errors="replace"))
    removed = []
    for d in candidates:
        if any(str(d) in a for a in in_use):
            continue
        if not (d / "server.properties").exists() or _state_mentions(d):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _state_mentions(d: Path) -> bool:
    """A CLI-started broker that is starting right now is named in the default state file."""
    with contextlib.suppress(OSError, ValueError):
        return str(d) in default_state_file().read_text()
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours still "exists": reap it if it is ours
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return True


def _pid_is_broker(pid: int, config_path: str) -> bool:
    """Guard against pid reuse: the process must be a kafka.Kafka with our config file."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _pid_alive(pid)
    args = [a.decode(errors="replace") for a in cmdline]
    return "kafka.Kafka" in args and config_path in args


# --------------------------------------------------------------------------- the broker


class KafkaBroker:
    """One single-node KRaft broker (combined broker+controller) on 127.0.0.1."""

    def __init__(
        self,
        port: int | None = None,
        *,
        controller_port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        version: str | None = None,
        heap: str = DEFAULT_HEAP,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        die_with_parent: bool = True,
        extra_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.version = version or kafka_version()
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.die_with_parent = die_with_parent
        self.extra_config = dict(extra_config or {})
        self._fixed_port = port
        self._fixed_controller_port = controller_port
        self.port: int | None = port
        self.controller_port: int | None = controller_port
        self.owns_root = data_dir is None
        self.root: Path | None = Path(data_dir).resolve() if data_dir is not None else None
        self.pid: int | None = None
        self.started_at: float | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._cds_tmp: Path | None = None
        self._cds_final: Path | None = None
        self.cluster_id: str | None = None

    # -- layout -----------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            msg = "broker not started"
            raise RuntimeError(msg)
        return f"{HOST}:{self.port}"

    def _dir(self, name: str) -> Path:
        assert self.root is not None
        return self.root / name

    @property
    def log_dir(self) -> Path:
        return self._dir("logs")

    @property
    def server_log(self) -> Path:
        return self.log_dir / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.log_dir / "stdout.log"

    @property
    def config_path(self) -> Path:
        return self._dir("server.properties")

    def server_properties(self) -> dict[str, Any]:
        assert self.port is not None and self.controller_port is not None
        p, c = self.port, self.controller_port
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            # static quorum (see module docstring for why not --standalone/dynamic)
            "controller.quorum.voters": f"1@{HOST}:{c}",
            "listeners": f"PLAINTEXT://{HOST}:{p},CONTROLLER://{HOST}:{c}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{p},CONTROLLER://{HOST}:{c}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self._dir("data")),
            "auto.create.topics.enable": "true",
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            # a test broker: first group join / transaction shouldn't create 50 partitions
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "log.retention.hours": 168,
            "delete.topic.enable": "true",
        }
        props.update(self.extra_config)
        return props

    def java_command(
        self, libs: Path, main: str, *args: str, jvm: Iterable[str] = (), tool: bool = False
    ) -> list[str]:
        if tool:  # short-lived CLI tool: C1 only and the serial GC start fastest
            opts = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
        else:  # what kafka-run-class.sh / kafka-server-start.sh use, with a smaller heap
            opts = [
                f"-Xmx{self.heap}",
                "-Xms128m",
                "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20",
                "-XX:InitiatingHeapOccupancyPercent=35",
                "-XX:+ExplicitGCInvokesConcurrent",
            ]
        cmd = [
            java_bin(),
            *opts,
            *jvm,
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.log_dir}",
        ]
        if LOG4J_CONFIG_PATH.exists():
            cmd.append(f"-Dlog4j2.configurationFile={LOG4J_CONFIG_PATH}")
        cmd += ["-cp", f"{libs}/*", main, *args]
        return cmd

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> KafkaBroker:
        if self._proc is not None:
            msg = "broker already started"
            raise RuntimeError(msg)
        t0 = time.monotonic()
        libs = ensure_jars(self.version)
        if self.root is None:
            with contextlib.suppress(OSError):
                sweep_stale_temp_dirs()
            self.root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._format(libs)
            # Free ports can be taken between picking and binding: retry with new ones.
            attempts = 1 if self._fixed_port and self._fixed_controller_port else 3
            for attempt in range(attempts):
                self.port = self._fixed_port or None
                self.controller_port = self._fixed_controller_port or None
                want = [x for x in (self.port, self.controller_port) if x]
                picked = iter(p for p in free_ports(4) if p not in want)
                self.port = self.port or next(picked)
                self.controller_port = self.controller_port or next(picked)
                self._write_config()
                for port in (self.port, self.controller_port):
                    if _port_open(HOST, port, timeout=0.2):
                        msg = f"port {HOST}:{port} is already in use"
                        raise KafkaStartError(msg)
                try:
                    self._launch(libs)
                    # the timeout covers the JVM, not a first Maven download
                    self._wait_ready(time.monotonic())
                    break
                except KafkaStartError:
                    tail = self.log_tail(200)
                    bind_error = "BindException" in tail or "Address already in use" in tail
                    self._kill()
                    if not bind_error or attempt == attempts - 1:
                        raise
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _write_config(self) -> None:
        lines = [f"{k}={v}" for k, v in self.server_properties().items()]
        self.config_path.write_text("# written by newsflow.kafka_local\n" + "\n".join(lines) + "\n")

    def _format(self, libs: Path) -> None:
        # ports are irrelevant to formatting with a static quorum; use placeholders
        self.port = self.port or 9092
        self.controller_port = self.controller_port or 9093
        self._write_config()
        cid_file = self._dir("cluster.id")
        cid = cid_file.read_text().strip() if cid_file.exists() else random_cluster_id()
        cid_file.write_text(cid + "\n")
        self.cluster_id = cid
        cds_flags, tmp, final = self._cds(libs).flags("storage-format")
        ok = False
        try:
            _run_checked(
                self.java_command(
                    libs,
                    "kafka.tools.StorageTool",
                    "format",
                    "--ignore-formatted",
                    "-t",
                    cid,
                    "-c",
                    str(self.config_path),
                    jvm=cds_flags,
                    tool=True,
                ),
                "kafka storage format",
                timeout=120,
            )
            ok = True
        finally:
            ClassDataSharing.commit(tmp, final, ok)

    def _cds(self, libs: Path) -> ClassDataSharing:
        return ClassDataSharing(libs, java_bin())

    def _launch(self, libs: Path) -> None:
        cds_flags, self._cds_tmp, self._cds_final = self._cds(libs).flags("broker")
        with open(self.stdout_log, "ab") as out:
            self._proc = subprocess.Popen(
                self.java_command(libs, "kafka.Kafka", str(self.config_path), jvm=cds_flags),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=str(self.root),
                start_new_session=True,  # a Ctrl-C in the caller's terminal doesn't hit it
                preexec_fn=_pdeathsig_hook() if self.die_with_parent else None,
            )
        self.pid = self._proc.pid
        self.started_at = time.time()

    def _wait_ready(self, t0: float) -> None:
        assert self._proc is not None and self.port is not None
        deadline = t0 + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                msg = (
                    f"Kafka broker exited with code {self._proc.returncode} during startup\n"
                    f"--- {self.server_log} / {self.stdout_log} (tail) ---\n{self.log_tail(40)}"
                )
                raise KafkaStartError(msg)
            # the cluster id check makes sure it is *our* broker answering on that port
            if metadata_ok(self.bootstrap, timeout=2.0, cluster_id=self.cluster_id):
                return
            if time.monotonic() > deadline:
                msg = (
                    f"Kafka broker not ready on {self.bootstrap} after {self.startup_timeout:.0f} s\n"
                    f"--- log tail ---\n{self.log_tail(40)}"
                )
                raise KafkaStartError(msg)
            time.sleep(0.1)

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return (
            self.pid is not None
            and _pid_alive(self.pid)
            and _pid_is_broker(self.pid, str(self.config_path))
        )

    def _kill(self, grace: float = 30.0) -> None:
        pid = self.pid
        if pid is None:
            return
        if self._cds_tmp is not None:
            grace += 60.0  # the JVM writes its class archive (~50 MB) on the way out
        clean = True
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(grace)
                except subprocess.TimeoutExpired:
                    clean = False
                    self._proc.kill()
                    self._proc.wait(10)
        elif _pid_alive(pid) and _pid_is_broker(pid, str(self.config_path)):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _pid_alive(pid):
                clean = False
                os.kill(pid, signal.SIGKILL)
                while _pid_alive(pid):
                    time.sleep(0.05)
        ClassDataSharing.commit(self._cds_tmp, self._cds_final, clean)
        self._cds_tmp = self._cds_final = None
        self._proc = None
        self.pid = None

    def stop(self, *, remove_data: bool | None = None) -> None:
        """Terminate the broker; remove its dir if it was a temp dir we created."""
        self._kill()
        if remove_data is None:
            remove_data = self.owns_root
        if remove_data and self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 50) -> str:
        out: list[str] = []
        for path in (self.server_log, self.stdout_log):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()
                if text:
                    out.append(f"== {path} ==")
                    out.extend(text[-lines:])
        return "\n".join(out)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state file (for the CLI) -----------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "port": self.port,
            "controller_port": self.controller_port,
            "bootstrap": self.bootstrap,
            "root": str(self.root),
            "owns_root": self.owns_root,
            "version": self.version,
            "started_at": self.started_at,
            "startup_seconds": self.startup_seconds,
            "server_log": str(self.server_log),
            "cds_tmp": str(self._cds_tmp) if self._cds_tmp else None,
            "cds_final": str(self._cds_final) if self._cds_final else None,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> KafkaBroker:
        b = cls(
            port=state["port"],
            controller_port=state.get("controller_port"),
            data_dir=state["root"],
            version=state.get("version"),
        )
        b.owns_root = bool(state.get("owns_root"))
        b.pid = state.get("pid")
        b.started_at = state.get("started_at")
        b.startup_seconds = state.get("startup_seconds")
        b._cds_tmp = Path(state["cds_tmp"]) if state.get("cds_tmp") else None
        b._cds_final = Path(state["cds_final"]) if state.get("cds_final") else None
        return b


# --------------------------------------------------------------------------- CLI


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_state(path: Path, state: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def _cmd_start(args: argparse.Namespace) -> int:
    state_path: Path = args.state_file
    old = _read_state(state_path)
    if old is not None:
        prev = KafkaBroker.from_state(old)
        if prev.is_running():
            print(
                f"kafka_local: a broker from {state_path} is already running "
                f"(pid {prev.pid}, {prev.bootstrap}); stop it first or use --state-file",
                file=sys.stderr,
            )
            return 1
        prev.stop()  # stale state: clean its temp dir
        state_path.unlink(missing_ok=True)

    broker = KafkaBroker(
        port=args.port,
        controller_port=args.controller_port,
        data_dir=args.data_dir,
        heap=args.heap,
        startup_timeout=args.timeout,
        die_with_parent=args.foreground,
    )
    try:
        broker.start()
    except KafkaStartError as exc:
        print(f"kafka_local: {exc}", file=sys.stderr)
        return 1
    _write_state(state_path, broker.state())
    print(
        f"kafka_local: Kafka {broker.version} ready in {broker.startup_seconds:.1f} s "
        f"(pid {broker.pid}, dir {broker.root}, log {broker.server_log})",
        file=sys.stderr,
    )
    print(f"KAFKA_BOOTSTRAP={broker.bootstrap}", flush=True)
    if not args.foreground:
        return 0

    def _on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_signal)
    try:
        assert broker._proc is not None
        code = broker._proc.wait()
        print(f"kafka_local: broker exited with code {code}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()
        state_path.unlink(missing_ok=True)


def _cmd_status(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if state is None:
        print(f"kafka_local: not running (no state in {args.state_file})")
        return 3
    broker = KafkaBroker.from_state(state)
    alive = broker.is_running()
    ready = alive and metadata_ok(broker.bootstrap)
    status = "running" if ready else ("starting/unresponsive" if alive else "dead (stale state)")
    print(f"kafka_local: {status}: pid {broker.pid}, dir {broker.root}, log {broker.server_log}")
    if ready:
        print(f"KAFKA_BOOTSTRAP={broker.bootstrap}")
        return 0
    return 3


def _cmd_stop(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if state is None:
        print(f"kafka_local: nothing to stop (no state in {args.state_file})")
        return 0
    broker = KafkaBroker.from_state(state)
    was_running = broker.is_running()
    broker.stop(remove_data=None if not args.keep else False)
    args.state_file.unlink(missing_ok=True)
    print(
        f"kafka_local: {'stopped' if was_running else 'was not running'} (pid {state.get('pid')})"
    )
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if state is None:
        print(f"kafka_local: no state in {args.state_file}", file=sys.stderr)
        return 1
    print(KafkaBroker.from_state(state).log_tail(args.lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/kafka/kafka_local.py",
        description="Run a local single-node Apache Kafka broker (KRaft) from Maven jars.",
    )
    parser.add_argument(
        "--state-file",
        type=Path,
        default=None,
        help="where start records pid/ports/dir (default %(default)s -> "
        "~/.cache/newsflow/kafka.state.json)",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_start = sub.add_parser("start", help="start a broker and print KAFKA_BOOTSTRAP=host:port")
    p_start.add_argument("--port", type=int, default=None, help="PLAINTEXT port (default: free)")
    p_start.add_argument("--controller-port", type=int, default=None)
    p_start.add_argument(
        "--data-dir",
        default=None,
        help="persistent broker dir, kept by stop (default: a temp dir, removed)",
    )
    p_start.add_argument("--heap", default=DEFAULT_HEAP)
    p_start.add_argument("--timeout", type=float, default=DEFAULT_STARTUP_TIMEOUT)
    p_start.add_argument(
        "--foreground", action="store_true", help="stay attached; Ctrl-C/SIGTERM stops the broker"
    )
    sub.add_parser("status", help="exit 0 and print KAFKA_BOOTSTRAP if the broker answers")
    p_stop = sub.add_parser("stop", help="stop the broker and remove its temp dir")
    p_stop.add_argument("--keep", action="store_true", help="keep the broker dir")
    p_logs = sub.add_parser("logs", help="print the tail of the broker logs")
    p_logs.add_argument("-n", "--lines", type=int, default=80)
    # allow --state-file after the subcommand too
    for p in (p_start, p_stop, p_logs, sub.choices["status"]):
        p.add_argument("--state-file", type=Path, default=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.state_file is None:
        args.state_file = default_state_file()
    args.state_file = args.state_file.expanduser().resolve()
    return {"start": _cmd_start, "status": _cmd_status, "stop": _cmd_stop, "logs": _cmd_logs}[
        args.cmd
    ](args)


if __name__ == "__main__":
    sys.exit(main())
