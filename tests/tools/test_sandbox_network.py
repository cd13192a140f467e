"""The sandbox's user-mode network with real pasta, nsenter and bubblewrap: what a sandboxed
command reaches (the outside, named local ports) and what it does not (the host's loopback),
and that no pasta outlives the process that started it.

The outside world is a network namespace each test makes itself (a veth pair to a private
/30), the only place beyond loopback this suite may talk to."""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.tools.sandbox_helpers import require_sandbox
from vigil.tools import sandbox_network
from vigil.tools.sandbox_network import NetworkEntry

GREETING = b"vigil-host\n"
DEADLINE = 10.0

# Runs inside the sandbox: each probe concurrently, one JSON object of outcomes on stdout.
PROBE = r"""
import json, socket, subprocess, sys, threading
probes, out = json.loads(sys.argv[1]), {}
def probe(name, kind, address, port, timeout):
    try:
        if kind == "abstract":
            s = socket.socket(socket.AF_UNIX)
            target = "\0" + address
        else:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            s = socket.socket(family, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
            target = (address, port)
        s.settimeout(timeout)
        s.connect(target)
        if kind == "udp":
            s.send(b"ping")
        data = s.recv(64)
        out[name] = "reached" if data in (b"vigil-host\n", b"ping", b"outside\n") else "closed"
    except ConnectionRefusedError:
        out[name] = "refused"
    except (TimeoutError, socket.timeout):
        out[name] = "timeout"
    except OSError as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)
threads = [threading.Thread(target=probe, args=p) for p in probes]
for t in threads: t.start()
for t in threads: t.join()
addresses = json.loads(subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True).stdout or "[]")
out["own addresses"] = [a["local"] for i in addresses for a in i.get("addr_info", []) if a.get("scope") == "global"]
routes = json.loads(subprocess.run(["ip", "-j", "route", "show", "default"], capture_output=True, text=True).stdout or "[]")
out["gateway"] = routes[0].get("gateway") if routes else None
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def bwrap() -> str:
    return require_sandbox()


@pytest.fixture
def network(bwrap: str) -> NetworkEntry:
    """The shared namespace without local ports, or skip saying why there is none here."""
    return _require(())


def _require(ports: tuple[int, ...]) -> NetworkEntry:
    if shutil.which("pasta") is None:
        pytest.skip(f"pasta is not installed: {sandbox_network.INSTALL_HINT}")
    entry = sandbox_network.status(ports)
    if not entry.available:
        pytest.skip(f"no user-mode network here: {entry.problem}")
    return entry


def sandboxed(entry: NetworkEntry, bwrap: str, argv: list[str]) -> list[str]:
    """A command line like ``Sandbox.argv`` makes with the network on: the entry's prefix, then
    bubblewrap with the real namespace and process options and no ``--unshare-net``."""
    assert entry.prefix is not None
    return [*entry.prefix, bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/run", *entry.bwrap_args, "--unshare-pid", "--unshare-ipc",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--setenv", "TMPDIR", "/tmp",
            "--chdir", "/", "--", *argv]


def run_probes(entry: NetworkEntry, bwrap: str, probes: list[tuple]) -> dict:
    argv = sandboxed(entry, bwrap, [sys.executable, "-I", "-S", "-c", PROBE, json.dumps(probes)])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class HostServers:
    """Services on the host's loopback (TCP on 127.0.0.1 and ::1, UDP on 127.0.0.1, an abstract
    unix socket) and a TCP one on every address, each on a free port, greeting or echoing."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.tcp4 = self._tcp(socket.AF_INET, "127.0.0.1")
        self.tcp6 = self._tcp(socket.AF_INET6, "::1")
        self.anywhere = self._tcp(socket.AF_INET6, "::", dual=True)
        self.abstract = f"vigil-test-{uuid.uuid4().hex}"
        listener = self._listen(socket.socket(socket.AF_UNIX), "\0" + self.abstract)
        self._serve(listener)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        self.sockets.append(udp)
        self.udp4 = udp.getsockname()[1]
        threading.Thread(target=self._echo, args=(udp,), daemon=True).start()

    def _tcp(self, family: int, address: str, dual: bool = False) -> int:
        sock = socket.socket(family, socket.SOCK_STREAM)
        if dual:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self._listen(sock, (address, 0))
        self._serve(sock)
        return sock.getsockname()[1]

    def _listen(self, sock: socket.socket, address: object) -> socket.socket:
        sock.bind(address)
        sock.listen(16)
        self.sockets.append(sock)
        return sock

    def _serve(self, sock: socket.socket) -> None:
        def serve() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(GREETING)

        threading.Thread(target=serve, daemon=True).start()

    @staticmethod
    def _echo(sock: socket.socket) -> None:
        while True:
            try:
                data, peer = sock.recvfrom(64)
                if peer is None:  # shut down
                    return
                sock.sendto(data, peer)
            except OSError:
                return

    def close(self) -> None:
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def host() -> Iterator[HostServers]:
    servers = HostServers()
    try:
        yield servers
    finally:
        servers.close()


def _loopback_probes(host: HostServers, timeout: float = 2.0) -> list[tuple]:
    return [
        ("tcp 127.0.0.1", "tcp", "127.0.0.1", host.tcp4, timeout),
        ("tcp ::1", "tcp", "::1", host.tcp6, timeout),
        ("udp 127.0.0.1", "udp", "127.0.0.1", host.udp4, timeout),
        ("tcp 127.0.0.1 to a service on all addresses", "tcp", "127.0.0.1", host.anywhere, timeout),
    ]


def test_the_hosts_loopback_services_are_out_of_reach(network: NetworkEntry, bwrap: str,
                                                       host: HostServers) -> None:
    got = run_probes(network, bwrap, [*_loopback_probes(host, 1.0),
                                      ("abstract socket", "abstract", host.abstract, 0, 1.0)])
    assert {name: got[name] for name, *_ in _loopback_probes(host)} == {
        "tcp 127.0.0.1": "refused",
        "tcp ::1": "refused",
        "udp 127.0.0.1": "refused",
        "tcp 127.0.0.1 to a service on all addresses": "refused",
    }
    assert got["abstract socket"] == "refused"
    assert network.line() == "sandbox network: user-mode (pasta), host loopback closed, local ports: none"


def test_the_hosts_own_address_and_the_gateway_do_not_lead_back_to_the_host(
        network: NetworkEntry, bwrap: str, host: HostServers) -> None:
    # pasta copies the host's address into the namespace: there it is the namespace's own. And
    # the gateway must not be mapped to the host's loopback (pasta does that unless --no-map-gw).
    first = run_probes(network, bwrap, [])
    if not first["own addresses"]:
        pytest.skip("pasta copied no address (no interface with a default route here)")
    probes = [(f"own {address}", "tcp", address, host.anywhere, 1.0) for address in first["own addresses"]]
    if first["gateway"]:
        probes.append(("to the gateway", "tcp", first["gateway"], host.tcp4, 0.5))
    got = run_probes(network, bwrap, probes)
    assert all(got[name] == "refused" for name, *_ in probes if name.startswith("own ")), got
    assert got.get("to the gateway", "timeout") != "reached"


def test_named_local_ports_are_reachable_and_only_they(bwrap: str, host: HostServers) -> None:
    entry = _require((host.udp4, host.tcp6, host.tcp4))
    got = run_probes(entry, bwrap, _loopback_probes(host))
    assert {name: got[name] for name, *_ in _loopback_probes(host)} == {
        "tcp 127.0.0.1": "reached",
        "tcp ::1": "reached",
        "udp 127.0.0.1": "reached",
        "tcp 127.0.0.1 to a service on all addresses": "refused",
    }
    assert entry.local_ports == tuple(sorted({host.udp4, host.tcp6, host.tcp4}))
    assert entry.line().endswith(f"local ports: {', '.join(map(str, entry.local_ports))}")


OUTSIDE_SERVER = r"""
import socket, sys, threading
address = sys.argv[1]
tcp = socket.socket(); tcp.bind((address, 0)); tcp.listen(16)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind((address, 0))
def echo():
    while True:
        data, peer = udp.recvfrom(64); udp.sendto(data, peer)
threading.Thread(target=echo, daemon=True).start()
print(tcp.getsockname()[1], udp.getsockname()[1], flush=True)
while True:
    conn, _ = tcp.accept(); conn.sendall(b"outside\n"); conn.close()
"""


@pytest.fixture
def outside() -> Iterator[tuple[str, int, int]]:
    """A server in a network namespace of the test's own behind a veth pair: (address, TCP
    port, UDP port), reachable from the host as any outside machine would be."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("making a network namespace needs root and iproute2 (ip netns)")
    tag = uuid.uuid4().hex[:6]
    name, host_if, ns_if = f"vigil-test-{tag}", f"vgt{tag}a", f"vgt{tag}b"
    net = f"10.213.{random.randrange(256)}"
    setup = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
        ["ip", "link", "set", ns_if, "netns", name],
        ["ip", "addr", "add", f"{net}.1/30", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "-n", name, "addr", "add", f"{net}.2/30", "dev", ns_if],
        ["ip", "-n", name, "link", "set", ns_if, "up"],
    ]
    server: subprocess.Popen[str] | None = None
    try:
        for argv in setup:
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot make a network namespace here: {' '.join(argv)}: {done.stderr.strip()}")
        server = subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-I", "-S", "-c",
                                   OUTSIDE_SERVER, f"{net}.2"], stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], DEADLINE)
        assert ready, "the outside server did not start"
        tcp_port, udp_port = map(int, server.stdout.readline().split())
        yield f"{net}.2", tcp_port, udp_port
    finally:
        if server is not None:
            server.kill()
            server.wait()
            if server.stdout is not None:
                server.stdout.close()
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
        subprocess.run(["ip", "link", "delete", host_if], capture_output=True)


def test_the_outside_world_is_reached_over_tcp_and_udp(network: NetworkEntry, bwrap: str,
                                                       outside: tuple[str, int, int]) -> None:
    address, tcp_port, udp_port = outside
    got = run_probes(network, bwrap, [("tcp", "tcp", address, tcp_port, 5.0),
                                      ("udp", "udp", address, udp_port, 5.0)])
    assert (got["tcp"], got["udp"]) == ("reached", "reached")


def _state(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process, or ``None`` when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], fields[19]


def _wait_ended(pids: list[int], deadline: float = DEADLINE) -> list[int]:
    """Wait until each process has ended (gone, a zombie, or its PID taken by another
    process); the ones still running at the deadline."""
    started = {pid: _state(pid) for pid in pids}
    end = time.monotonic() + deadline
    while True:
        running = []
        for pid in pids:
            now, then = _state(pid), started[pid]
            if now is not None and then is not None and now[0] not in "ZX" and now[1] == then[1]:
                running.append(pid)
        if not running or time.monotonic() > end:
            return running
        time.sleep(0.01)


def test_the_namespace_is_shared_per_port_set_and_started_again_when_it_dies(network: NetworkEntry,
                                                                             bwrap: str) -> None:
    assert sandbox_network.network_prefix([]).holder_pid == network.holder_pid
    ports = sandbox_network.network_prefix([6, 5, 6])
    assert sandbox_network.network_prefix((5, 6)) == ports
    assert ports.holder_pid != network.holder_pid

    assert network.holder_pid is not None and network.pasta_pid is not None
    os.kill(network.holder_pid, signal.SIGKILL)
    assert _wait_ended([network.holder_pid, network.pasta_pid]) == []
    again = sandbox_network.network_prefix(())
    assert again.available and again.holder_pid != network.holder_pid
    done = subprocess.run(sandboxed(again, bwrap, ["true"]), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


OWNER = """
import json, sys
from vigil.tools import sandbox_network
entry = sandbox_network.network_prefix(json.loads(sys.argv[1]))
print(json.dumps([entry.pasta_pid, entry.holder_pid, entry.problem]), flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("end", ["SIGKILL", "exit"])
def test_no_pasta_outlives_the_process_that_started_it(network: NetworkEntry, end: str) -> None:
    with subprocess.Popen([sys.executable, "-c", OWNER, "[5432]"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as owner:
        assert owner.stdin is not None and owner.stdout is not None
        pasta, holder, problem = json.loads(owner.stdout.readline())
        assert problem is None
        assert _state(pasta) is not None and _state(holder) is not None
        if end == "SIGKILL":
            owner.kill()
        else:
            owner.stdin.close()
        owner.wait(DEADLINE)
    assert _wait_ended([pasta, holder]) == []


def test_a_forked_child_gets_its_own_namespace(network: NetworkEntry) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's exit handlers
        try:
            entry = sandbox_network.network_prefix(())
            trial = subprocess.run([*(entry.prefix or ("false",)), "true"]).returncode
            os.write(write, json.dumps([entry.holder_pid, entry.pasta_pid, trial]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as report:
        holder, pasta, trial = json.loads(report.read())
    os.waitpid(pid, 0)
    assert trial == 0
    assert holder != network.holder_pid
    assert sandbox_network.network_prefix(()).holder_pid == network.holder_pid
    assert _wait_ended([pasta, holder]) == []  # the child's lifeline ended with it


@pytest.fixture
def fresh() -> Iterator[None]:
    """No namespace or remembered failure from earlier tests, and none left for later ones."""
    sandbox_network.shutdown()
    yield
    sandbox_network.shutdown()


def test_without_pasta_it_says_what_to_install(fresh: None, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    entry = sandbox_network.network_prefix(())
    assert entry.prefix is None
    assert entry.line() == "sandbox network: unavailable: pasta is not installed (apt-get install passt)"


def test_a_pasta_that_fails_is_reported_by_its_first_meaningful_line(
        fresh: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "pasta"
    fake.write_text("#!/bin/sh\necho 'Failed to send 42 bytes to syslog' >&2\n"
                    "echo 'Failed to bind port 5432 in namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    entry = sandbox_network.network_prefix((5432,))
    assert entry.problem == "pasta did not start: Failed to bind port 5432 in namespace"
    fake.write_text("#!/bin/sh\nexit 3\n")
    # remembered for a while, so a broken pasta is not started again for every command
    assert sandbox_network.network_prefix((5432,)).problem == entry.problem
    assert sandbox_network.status((5432,)).problem == "pasta did not start: pasta exited with code 3"


RESOLVER_OWNER = r"""
import socket, struct, subprocess, sys, threading
from vigil.tools import sandbox_network
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind((sys.argv[1], 53))
def answer():
    while True:  # every A question gets 203.0.113.7
        query, peer = server.recvfrom(512)
        end = 12
        while query[end]:
            end += query[end] + 1
        end += 5
        a = struct.unpack("!H", query[end - 4:end - 2])[0] == 1
        record = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + bytes([203, 0, 113, 7]) if a else b""
        server.sendto(query[:2] + b"\x81\x80" + query[4:6] + struct.pack("!HHH", int(a), 0, 0)
                      + query[12:end] + record, peer)
threading.Thread(target=answer, daemon=True).start()
entry = sandbox_network.network_prefix(())
argv = [*entry.prefix, sys.argv[2], "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        "--tmpfs", "/tmp", "--tmpfs", "/run", *entry.bwrap_args, "--unshare-pid", "--cap-drop", "ALL", "--",
        "getent", "hosts", "vigil-test.example"]
done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
print(done.stdout.strip() or done.stderr.strip())
"""


def test_a_resolver_on_the_hosts_loopback_still_answers(network: NetworkEntry, bwrap: str, tmp_path: Path) -> None:
    # The host's resolv.conf is replaced in a private mount namespace (root only) by one naming
    # a resolver on a loopback address of its own; in the sandbox that address would be the
    # namespace's own loopback, so pasta has to forward the queries.
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("replacing /etc/resolv.conf for one process needs root and unshare")
    resolver = f"127.{random.randrange(1, 255)}.{random.randrange(256)}.{random.randrange(1, 255)}"
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(f"search example\nnameserver {resolver}\noptions edns0\n")
    script = (f"mount --bind {resolv} /etc/resolv.conf && "
              f"exec {sys.executable} -c \"$0\" {resolver} {bwrap}")
    done = subprocess.run(["unshare", "--mount", "sh", "-c", script, RESOLVER_OWNER],
                          capture_output=True, text=True, timeout=30)
    if "Address already in use" in done.stderr or "Operation not permitted" in done.stderr:
        pytest.skip(f"cannot set up a resolver here: {done.stderr.strip().splitlines()[-1]}")
    assert done.stdout.split() == ["203.0.113.7", "vigil-test.example"], done.stderr
