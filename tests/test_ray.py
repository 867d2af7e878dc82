"""--ray: compiling and measuring on a real Ray cluster, started by the tests on loopback (127.0.0.1, no
dashboard; every process of it listens on loopback only, checked), and nothing of it left running afterwards. Skipped when the optional extra is not installed (CI
installs it: scripts/setup.sh --test)."""
from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from boo_engine.cluster.connect import Cluster
from boo_engine.cluster.loopback import LoopbackCluster
from boo_engine.config import SessionConfig
from boo_engine.results import DONE, FAILED, INTERRUPTED, MEASURING
from boo_engine.session import Session

COMMANDS = [
    "conv -n 1 -c 8 -H 16 -W 16 -k 8 -y 3 -x 3 --iter 20",
    "gemm -m 64 -n 64 -k 64 --iter 20",
    "layernorm --input 4x64 --normalized_dim 1 -F 1 --iter 20",
]


def _alive(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return "Z" not in line.split()[1]
    except OSError:
        return False
    return False


def _gone(pids, timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def cluster():
    """One head with 2 CPUs for the module; this process joins it (Ray's driver is per process) and leaves it
    at the end, then the cluster's processes are killed and checked gone."""
    import ray

    c = LoopbackCluster(cpus=2)
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        Cluster._joined = None
        pids = c.pids()
        c.stop()
        assert not _gone(pids), "processes of the test cluster are still running"


def _listening(pids) -> dict[str, set[str]]:
    """What each of `pids` listens on (TCP listening, UDP bound), read from /proc: {"pid comm": {"addr:port"}}."""
    where: dict[str, str] = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] not in ("0A", "07"):       # LISTEN (tcp), unconnected (udp)
                continue
            hexaddr, port = f[1].split(":")
            raw = bytes.fromhex(hexaddr)       # 32-bit words in host (little-endian) order
            addr = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
            where[f[9]] = f"{addr}:{int(port, 16)}"
    found: dict[str, set[str]] = {}
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        links = []
        for fd in fds:
            with contextlib.suppress(OSError):     # (closed since it was listed)
                links.append(os.readlink(fd))
        inodes = [link[8:-1] for link in links if link.startswith("socket:[")]
        if socks := {where[i] for i in inodes if i in where}:
            found[f"{pid} {comm}"] = socks
    return found


def _exposed(listening: dict[str, set[str]]) -> dict[str, set[str]]:
    """The sockets of `listening` that are not on loopback (an IPv4-mapped 127.x is loopback)."""
    def loopback(sock: str) -> bool:
        ip = ipaddress.ip_address(sock.rpartition(":")[0])
        mapped = getattr(ip, "ipv4_mapped", None)
        return ip.is_loopback or bool(mapped and mapped.is_loopback)
    return {who: bad for who, socks in listening.items() if (bad := {s for s in socks if not loopback(s)})}


def _tree(root: int) -> set[int]:
    """`root` and its live descendants."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree and p not in tree}
        tree |= more
        grew = bool(more)
    return tree


def test_a_loopback_cluster_and_its_driver_listen_on_loopback_only(cluster):
    """Ray replaces a loopback --node-ip-address by the machine's address, and its processes then listen on
    every interface: the cluster (Ray's switch) and a driver joining it at 127.0.0.1 (require_ray) stay on
    loopback: the GCS, the raylet, its agents, a worker, the client server where Ray's client is installed,
    and this process's own server."""
    import ray

    Cluster(cluster.address)
    assert ray.get(ray.remote(lambda: os.getpid()).remote()) in cluster.pids()    # a worker is up
    listening = _listening([*cluster.pids(), os.getpid()])
    names = " ".join(listening)
    assert "gcs_server" in names and "raylet" in names and f"{os.getpid()} " in names, listening
    if cluster.client_port:     # the client server is the cluster's too (stopped with it)
        assert any(s.endswith(f":{cluster.client_port}") for socks in listening.values() for s in socks), listening
    assert not _exposed(listening), listening


def test_ray_local_starts_a_cluster_on_loopback_locked_with_a_token_of_its_own(tmp_path, cli_env):
    """`--ray local` as users run it: every process of the cluster it starts (and the run's own) listens on
    loopback only, the cluster asks for a token that only the run's processes hold (not written to ~/.ray,
    where Ray 2.60 would put one that every later `ray start` of the user then asks for), and nothing of it is
    left running when the run ends."""
    home = tmp_path / "home"
    home.mkdir()
    short = Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))   # Ray's socket paths live under it: < 108 bytes
    env = {k: v for k, v in cli_env.items() if not k.startswith(("RAY_AUTH", "RAY_ENABLE_WINDOWS"))}
    # (HOME: where Ray would write its token; the caches stay the user's, the CPU's measured peaks with them)
    env.update(HOME=str(home), TMPDIR=str(short), XDG_CACHE_HOME=env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    proc = subprocess.Popen([sys.executable, "-m", "boo_tui", "--headless", "--db", str(tmp_path / "r.db"),
                             "--target", "cpu", "--backend", "iree", "--min-time", "1.5", "--ray", "local",
                             COMMANDS[1]], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[str, set[str]] = {}
    gcs_env = b""
    try:
        while proc.poll() is None:
            for who, socks in _listening(_tree(proc.pid)).items():
                seen.setdefault(who, set()).update(socks)
                if who.endswith(" gcs_server") and not gcs_env:
                    with contextlib.suppress(OSError):
                        gcs_env = Path(f"/proc/{who.split()[0]}/environ").read_bytes()
            time.sleep(0.3)
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(short, ignore_errors=True)
    assert proc.returncode == 0, out
    names = " ".join(seen)
    assert "gcs_server" in names and "raylet" in names and f"{proc.pid} " in names and "ray::" in names, seen
    assert not _exposed(seen), seen
    assert b"RAY_AUTH_MODE=token\0" in gcs_env and b"RAY_AUTH_TOKEN=" in gcs_env
    assert not (home / ".ray" / "auth_token").exists()
    assert not _gone([int(who.split()[0]) for who in seen])


def _config(tmp_path: Path, cluster, **kw) -> SessionConfig:
    base = dict(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path.parent / "ray-kernels"),
                rounds=2, ray_address=cluster.address if cluster is not None else None)
    base.update(kw)
    return SessionConfig(**base)


def _run(session: Session, inputs, timeout_s: float = 240.0) -> None:
    session.add_inputs(inputs)
    session.start()
    assert session.wait(timeout=timeout_s), "the run did not finish"


def test_run_through_the_cluster_matches_a_local_run(cluster, tmp_path):
    with Session(_config(tmp_path, cluster)) as session:
        _run(session, COMMANDS)
        ray_results = list(session.jobs.values())
        workers = [s._worker for s in session._measuring.stages]
        env = session.environment()
        info = workers[0].actor_info
    assert len(ray_results) == 2 * len(COMMANDS)       # iree and torch per command
    assert all(r.status == DONE for r in ray_results), [(r.func_name, r.backend, r.error) for r in ray_results]
    assert {r.node for r in ray_results} == {workers[0].node} and workers[0].node
    assert all(len(r.samples_us) == 20 for r in ray_results)
    assert env["ray"]["address"] == cluster.address and len(env["ray"]["nodes"]) == 1
    # the node is stored and exported
    con = sqlite3.connect(tmp_path / "r.db")
    assert {n for (n,) in con.execute("SELECT node FROM results")} == {workers[0].node}
    # the actor and its benchmark worker process end with the session: nothing of ours left running
    assert info["pid"] and info["worker_pid"]
    assert not _gone([info["pid"], info["worker_pid"]])

    local = tmp_path / "local"
    local.mkdir()
    with Session(_config(local, None)) as session:
        _run(session, COMMANDS)
        local_results = list(session.jobs.values())
    assert len(local_results) == len(ray_results)
    assert all(r.status == DONE and r.node is None for r in local_results)
    assert sorted((r.func_name, r.backend) for r in local_results) == \
        sorted((r.func_name, r.backend) for r in ray_results)


def test_compiles_travel_to_this_host_when_the_node_does_not_share_its_cache(cluster, tmp_path):
    """A node compiling into a folder this host does not see ships the entry through the object store: it lands
    in our cache under the same key, with the reproducer's paths rewritten to ours, and a local compile of the
    same kernel is then a cache hit."""
    from boo_engine.cluster.compiling import RayCompilePool
    from boo_engine.commands import parse_command
    from boo_engine.compile.build import compile_signature
    from boo_engine.compile.cache import KernelCache

    ours = KernelCache(tmp_path / "ours")
    theirs = tmp_path / "node-cache"
    sig = parse_command("gemm -m 32 -n 48 -k 16")
    pool = RayCompilePool(Cluster(cluster.address), ours, node_cache=str(theirs))
    try:
        art = pool.submit(sig, "cpu").result(timeout=240)
    finally:
        pool.shutdown()
    assert Path(art.vmfb_path).is_file() and str(ours.root) in art.vmfb_path
    assert not art.cache_hit
    script = (Path(art.dir) / "compile_command.sh").read_text()
    assert str(ours.root) in script and str(theirs) not in script
    assert all(str(theirs) not in part for part in art.command)
    node_vmfb = next(theirs.rglob("kernel.vmfb"))
    assert node_vmfb.read_bytes() == Path(art.vmfb_path).read_bytes()
    again = compile_signature(sig, "cpu", cache=ours)
    assert again.cache_hit and again.key == art.key


def test_a_compile_on_a_node_runs_at_a_local_compiles_niceness_not_rays(cluster, tmp_path):
    """Ray runs task workers at nice 15: a compile there starved behind anything at nice 0 (a ray:// run beside
    a busy core waited past 300 s for a 3 s compile, in CI). It runs at COMPILE_NICENESS, as a local compile."""
    import ray

    from boo_engine.cluster.remote import CompileOrder, compile_remote
    from boo_engine.commands import parse_command
    from boo_engine.compile.flags import as_target
    from boo_engine.compile.worker import COMPILE_NICENESS
    from boo_engine.variants import BASELINE

    if os.geteuid() != 0 and resource.getrlimit(resource.RLIMIT_NICE)[0] < 20 - COMPILE_NICENESS:
        pytest.skip("this user may not lower a process's niceness")
    Cluster(cluster.address)
    order = CompileOrder(sig=parse_command("gemm -m 8 -n 8 -k 8"), target=as_target("cpu"), variant=BASELINE,
                         extra_flags=(), cache_root=str(tmp_path / "c"), share_token=".none", timeout_s=240)
    shipped = ray.get(compile_remote().remote(order), timeout=240)
    assert shipped.nice == COMPILE_NICENESS, shipped


def _pid_of_measuring_actor(session: Session, timeout_s: float = 120.0) -> tuple[int, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        measuring = [r for r in session.jobs.values() if r.status == MEASURING and r.samples_us]
        info = session._measuring.stages[0]._worker.actor_info
        if measuring and info.get("pid"):
            return int(info["pid"]), measuring[0].job_id
        time.sleep(0.05)
    raise AssertionError("no job started measuring")


def test_an_actor_killed_mid_run_fails_its_job_and_the_run_goes_on(cluster, tmp_path):
    """One node: nowhere else to go, so the job in hand fails naming the node, and a fresh actor on the same
    node measures the rest."""
    config = _config(tmp_path, cluster, min_time_s=1.5, backends=("iree",))
    with Session(config) as session:
        session.add_inputs(COMMANDS[:2])
        session.start()
        pid, job_id = _pid_of_measuring_actor(session)
        os.kill(pid, signal.SIGKILL)
        assert session.wait(timeout=240)
        results = dict(session.jobs)
    killed = results[job_id]
    assert killed.status == FAILED and "died" in (killed.error or ""), killed.error
    others = [r for j, r in results.items() if j != job_id]
    assert others and all(r.status == DONE for r in others), [(r.status, r.error) for r in others]


def test_an_actor_killed_on_one_of_two_nodes_moves_its_command_to_the_other(tmp_path):
    """Two nodes: the group whose actor died is measured again, whole, on the other node."""
    import ray

    if ray.is_initialized():   # the module's cluster: this test joins its own
        ray.shutdown()
    Cluster._joined = None
    with LoopbackCluster(cpus=1, loopback=False) as two:    # (Ray refuses a second node on loopback)
        two.add_node(cpus=1)
        try:
            config = _config(tmp_path, two, min_time_s=1.5, backends=("iree",))
            with Session(config) as session:
                assert len(session._measuring.stages) == 2
                session.add_inputs(COMMANDS[:1])
                session.start()
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    busy = [s for s in session._measuring.stages if s._worker.actor_info.get("pid")
                            and any(r.status == MEASURING and r.samples_us for r in session.jobs.values())]
                    if busy:
                        break
                    time.sleep(0.05)
                first = next(r for r in session.jobs.values() if r.status == MEASURING)
                lost_node = first.node or busy[0].node
                stage = next(s for s in session._measuring.stages if s._worker.actor_info.get("pid"))
                lost_node = stage.node
                os.kill(int(stage._worker.actor_info["pid"]), signal.SIGKILL)
                assert session.wait(timeout=240)
                results = list(session.jobs.values())
        finally:
            ray.shutdown()
            Cluster._joined = None
    assert all(r.status == DONE for r in results), [(r.status, r.error) for r in results]
    assert {r.node for r in results} != {lost_node} and all(r.node for r in results)


def _cli(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "boo_tui", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_cluster_going_away_interrupts_the_run_and_resume_finishes_it_locally(tmp_path, cli_env):
    """The head dies mid-measurement: the run ends interrupted (what was measured kept), the process exits by
    itself, and --resume measures the rest on this host."""
    db = tmp_path / "r.db"
    with LoopbackCluster(cpus=2) as gone:
        proc = subprocess.Popen([sys.executable, "-m", "boo_tui", "--headless", "--db", str(db), "--target", "cpu",
                                 "--backend", "iree", "--no-best", "--min-time", "1.5", "--ray", gone.address,
                                 *COMMANDS],
                                env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any("done" in line for line in out):
            time.sleep(0.1)
        assert any("done" in line for line in out), "".join(out)
        gone.stop()
        proc.wait(timeout=120)
        reader.join(5)
    text = "".join(out)
    assert proc.returncode == 1, text
    assert "went away" in text and "--resume" in text, text
    con = sqlite3.connect(db)
    (status,) = con.execute("SELECT status FROM runs").fetchone()
    assert status == "interrupted"
    statuses = [s for (s,) in con.execute("SELECT status FROM results")]
    assert "done" in statuses and INTERRUPTED in statuses, statuses
    con.close()
    resumed = _cli("--headless", "--db", str(db), "--resume", "--export", str(tmp_path / "r.json"), env=cli_env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert len(results) == len(COMMANDS) and all(r["status"] == "done" for r in results)


def test_ray_errors_are_one_line(tmp_path, cli_env):
    closed = _cli("--headless", "--db", str(tmp_path / "r.db"), "--ray", "127.0.0.1:9", COMMANDS[1], env=cli_env)
    assert closed.returncode == 2
    assert "no Ray cluster answers at 127.0.0.1:9" in closed.stderr and "Traceback" not in closed.stderr
    # without the extra: one line saying how to install it (a `ray` that cannot be imported shadows the real one)
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(fake.parent), cli_env.get("PYTHONPATH", "")]))
    for argv in (["-m", "boo_tui", "--headless", "--ray", "127.0.0.1:9", COMMANDS[1]],
                 ["-m", "boo_engine.cli.driver", "--ray", "127.0.0.1:9", "gemm", "-m", "8", "-n", "8", "-k", "8"]):
        p = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        assert "pip install" in p.stderr and "ray" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    env[ "BOO_RAY_ADDRESS"] = "127.0.0.1:9"
    p = subprocess.run([sys.executable, "-m", "boo_tui", "--headless", COMMANDS[1]], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "pip install" in p.stderr, p.stderr


def test_a_ray_client_address_without_the_client_says_what_to_install(tmp_path, cli_env):
    """ray:// needs Ray's client (grpcio, ray[client]): without it (a `grpc` that cannot be imported shadows any
    installed one), one line saying what to install, before anything runs."""
    fake = tmp_path / "nogrpc" / "grpc"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no grpc here')\n")
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(fake.parent), cli_env.get("PYTHONPATH", "")]))
    for argv in (["-m", "boo_tui", "--headless", "--db", str(tmp_path / "r.db"), "--ray", "ray://127.0.0.1:9",
                  COMMANDS[1]],
                 ["-m", "boo_engine.cli.driver", "--ray", "ray://127.0.0.1:9", "gemm", "-m", "8", "-n", "8", "-k", "8"]):
        p = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Ray's client" in p.stderr, p.stderr
        assert 'pip install "ray[client]' in p.stderr and '.[ray]' in p.stderr, p.stderr
    assert not (tmp_path / "r.db").exists()


def test_a_ray_client_address_runs_through_the_client_server(cluster, tmp_path, cli_env):
    """--ray ray://HOST:PORT (what the [ray] extra installs the client for): the run goes through the head's
    client server, and a client address where nothing answers is one line at once."""
    if cluster.client_address is None:
        pytest.skip("Ray's client (grpcio) is not installed")
    closed = _cli("--headless", "--db", str(tmp_path / "c.db"), "--ray", "ray://127.0.0.1:9", COMMANDS[1],
                  env=cli_env)
    assert closed.returncode == 2 and "no Ray cluster answers at ray://127.0.0.1:9" in closed.stderr, closed.stderr
    db = tmp_path / "r.db"
    run = _cli("--headless", "--db", str(db), "--backend", "iree", "--no-best", "--ray",
               cluster.client_address, COMMANDS[1], env=cli_env)
    if run.returncode == 2 and "did not finish joining" in run.stderr:
        # Ray's client server starts a driver of its own per client; in one suite run (load ~3) it did not come up
        # in 180 s and boo-tui said so in one line, as it should. Its logs are printed (shown if this fails), and the
        # run is tried once more: what this test checks is the path through the client server, not Ray's start-up
        logs = sorted(Path(cluster.temp_dir).glob("session_*/logs/ray_client_server*"))
        print("\n".join(f"{f}:\n{f.read_text(errors='replace')[-3000:]}" for f in logs))
        db = tmp_path / "r2.db"
        run = _cli("--headless", "--db", str(db), "--backend", "iree", "--no-best", "--ray",
                   cluster.client_address, COMMANDS[1], env=cli_env)
    assert run.returncode == 0, run.stdout + run.stderr
    con = sqlite3.connect(db)
    assert [(st, bool(n)) for st, n in con.execute("SELECT status, node FROM results")] == [("done", True)]
    con.close()


def _stuck_client_server() -> tuple[object, int]:
    """A Ray client server that takes the connection, answers the ping and never answers the join: Ray's client
    waits for the join without a limit (and, when a join fails, can hang closing its log stream)."""
    from concurrent import futures

    import grpc
    from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

    class Driver(ray_client_pb2_grpc.RayletDriverServicer):
        def ClusterInfo(self, request, context):
            return ray_client_pb2.ClusterInfoResponse(json="true")

    def swallow(requests, context):
        for _ in requests:   # takes every request, answers none
            pass
        return iter(())

    class Data(ray_client_pb2_grpc.RayletDataStreamerServicer):
        Datapath = staticmethod(swallow)

    class Logs(ray_client_pb2_grpc.RayletLogStreamerServicer):
        Logstream = staticmethod(swallow)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    ray_client_pb2_grpc.add_RayletDriverServicer_to_server(Driver(), server)
    ray_client_pb2_grpc.add_RayletDataStreamerServicer_to_server(Data(), server)
    ray_client_pb2_grpc.add_RayletLogStreamerServicer_to_server(Logs(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def test_a_ray_client_server_that_never_answers_the_join_is_one_line_not_a_hang(tmp_path, cli_env):
    pytest.importorskip("grpc")
    server, port = _stuck_client_server()
    code = ("import sys; import boo_engine.cluster.connect as c; c.CLIENT_JOIN_TIMEOUT_S = 3; "
            "from boo_tui.cli import main; sys.exit(main(sys.argv[1:]))")
    try:
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", code, "--headless", "--db", str(tmp_path / "r.db"), "--ray",
                            f"ray://127.0.0.1:{port}", COMMANDS[1]], env=cli_env, capture_output=True, text=True,
                           timeout=120)
        took = time.monotonic() - t0
    finally:
        server.stop(0)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not finish joining in 3 s" in lines[0], p.stderr
    assert took < 60, took


def test_tune_and_boo_driver_run_on_the_cluster(cluster, tmp_path, cli_env):
    """`boo-tui tune --ray` and `boo-driver --ray`: every result they store was measured by a node."""
    db = tmp_path / "t.db"
    tune = subprocess.run([sys.executable, "-m", "boo_tui.cli", "tune", "gemm --a_w 32 --a_h 32 --b_w 32",
                           "--budget", "3", "--final-time", "0.3", "--out", str(tmp_path / "out"), "--db", str(db),
                           "--ray", cluster.address], env=cli_env, capture_output=True, text=True, timeout=600)
    assert tune.returncode == 0, tune.stderr[-3000:]
    assert (tmp_path / "out" / "report.md").is_file()
    con = sqlite3.connect(db)
    total, with_node = con.execute("SELECT count(*), count(node) FROM results WHERE status = 'done'").fetchone()
    con.close()
    assert total > 0 and with_node == total
    db2 = tmp_path / "d.db"
    env = dict(cli_env, BOO_RAY_ADDRESS=cluster.address)   # the environment variable instead of --ray
    drv = subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", "gemm", "-m", "64", "-n", "64", "-k", "64",
                          "--iter", "10", "--db", str(db2)], env=env, capture_output=True, text=True, timeout=300)
    assert drv.returncode == 0, drv.stdout + drv.stderr
    con = sqlite3.connect(db2)
    assert [n for (n,) in con.execute("SELECT node FROM results")] and \
        all(n for (n,) in con.execute("SELECT node FROM results"))
    con.close()


def test_a_node_without_the_variants_files_gets_them(tmp_path):
    """A spec path the node cannot write (another machine's layout) is written to a folder of the node's; one it
    can write is written at the same path, so the flags, and the cache key, stay the caller's."""
    from boo_engine.cluster.remote import _materialize, variant_files
    from boo_engine.variants import Variant

    spec = tmp_path / "spec.mlir"
    spec.write_text("// a spec\n")
    v = Variant(name="tuned", tuning_specs=(str(spec),))
    files = variant_files(v)
    assert _materialize(v, files) is v                       # the node has it: nothing changes
    elsewhere = tmp_path / "not-yet" / "spec.mlir"
    v2 = Variant(name="tuned", tuning_specs=(str(elsewhere),))
    assert _materialize(v2, {str(elsewhere): b"// a spec\n"}) is v2 and elsewhere.read_bytes() == b"// a spec\n"
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    v3 = Variant(name="tuned", tuning_specs=(str(blocked / "spec.mlir"),))
    moved = _materialize(v3, {str(blocked / "spec.mlir"): b"// a spec\n"})
    assert moved.tuning_specs[0] != str(blocked / "spec.mlir")
    assert Path(moved.tuning_specs[0]).read_bytes() == b"// a spec\n"
    assert moved.key_material() == v.key_material()          # same content, same key


def test_the_dashboard_runs_on_the_cluster_and_names_the_node(cluster, tmp_path):
    """The dashboard does not know the difference: the same session, its jobs measured by the cluster's actor,
    the detail pane naming the node."""
    import asyncio
    import io

    from rich.console import Console
    from tui_pilot import wait_until

    from boo_engine.results import FINAL_STATUSES
    from boo_tui.app import BooApp

    app = BooApp(_config(tmp_path, cluster), COMMANDS[1:2])

    async def body() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: bool(app.model.jobs) and all(
                v.status in FINAL_STATUSES for v in app.model.jobs.values()), 240, "the run to finish")
            views = list(app.model.jobs.values())
            assert all(v.status == DONE and v.result.node for v in views), [(v.status, v.result.error) for v in views]
            app.results.select(views[0].job_id)
            await pilot.pause(0.3)
            console = Console(width=150, record=True, file=io.StringIO())
            console.print(app.query_one("#detail").content)
            detail = console.export_text()
            assert "node" in detail and views[0].result.node in detail, detail
            await pilot.press("q")

    asyncio.run(body())
