"""A kernel cache entry is native code: it is loaded only when the user's key signed it and nobody else can write
where it lies (compile/trust.py). Real compiles, real runs, a real planted library; nothing mocked.

The attack (issue 24): a kernel.vmfb whose executable is a system library linked with an object whose constructor
writes a file, planted in a cache entry with a meta.json whose size and sha256 match. IREE's runtime dlopens the
library when the module loads, so the constructor ran before any kernel did, and the run still said "numerics
pass", exit 0. Now such an entry is no hit: it is compiled anew, said once, and the planted code never runs."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache, adopt
from boo_engine.compile.pool import compile_signature, lookup_cached

ROOT = Path(__file__).resolve().parents[1]
CMD, OTHER = "gemm -m 8 -n 8 -k 8", "gemm -m 8 -n 16 -k 8"
RUN = ["--backend", "iree", "--iter", "5"]
NOTICE = "not loaded, compiled anew"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def user(tmp_path, monkeypatch):
    """This test's user: a config folder of its own (so a key of its own, made on first use), no shared key."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("BOO_CACHE_KEY", raising=False)
    monkeypatch.delenv("BOO_DB", raising=False)
    return tmp_path / "config" / "boo-tui" / "cache-key"


def env(cache: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "BOO_CACHE_DIR": str(cache), **extra}


def boo(args, environ, cwd, prog="boo_tui"):
    return subprocess.run([sys.executable, "-m", prog, *map(str, args)], env=environ, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def results(path: Path) -> dict[str, dict]:
    return {r["command"]: r for r in json.loads(path.read_text())["results"]}


def module(result: dict) -> Path:
    """The kernel.vmfb a result measured, from its reproducer command."""
    return Path(next(a for a in shlex.split(result["reproducer"]) if a.startswith("--module="))[len("--module="):])


def said(p) -> str:
    return " ".join((p.stderr + p.stdout).split())   # rich may wrap a long line


CTOR = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE *f = fopen(MARKER, "w");
  if (f) { fputs("planted code ran\n", f); fclose(f); }
}
"""


def planted_vmfb(tmp_path: Path, entry: Path, marker: Path) -> Path:
    """The entry's kernel built again from its own command, but as a system library (not IREE's embedded ELF),
    linked by a "linker" that adds an object whose constructor writes `marker`: a working kernel that also runs
    someone else's code when it is loaded."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("needs a C compiler to build the planted library")
    work = tmp_path / "attacker"
    work.mkdir(exist_ok=True)
    (work / "ctor.c").write_text(CTOR)
    subprocess.run([gcc, "-c", "-fPIC", f'-DMARKER="{marker}"', str(work / "ctor.c"), "-o", str(work / "ctor.o")],
                   check=True, capture_output=True)
    linker = work / "link.sh"
    linker.write_text(f'#!/bin/sh\nexec {shlex.quote(gcc)} "$@" {shlex.quote(str(work / "ctor.o"))}\n')
    linker.chmod(0o755)
    command = json.loads((entry / "meta.json").read_text())["command"][:-2]   # without "-o kernel.vmfb"
    command = [a for a in command if not a.startswith("--iree-hal-dump-executable-configurations-to=")]
    out = work / "kernel.vmfb"
    subprocess.run(command + ["--iree-llvmcpu-link-embedded=false", f"--iree-llvmcpu-system-linker-path={linker}",
                              "-o", str(out)], check=True, capture_output=True, timeout=300)
    # the planted kernel is real: loading it runs the constructor (this is what a run used to do)
    load = "import sys; from boo_engine.runtime.launchable import load_artifact; load_artifact(sys.argv[1], 'local-sync')"
    subprocess.run([sys.executable, "-c", load, str(out)], check=True, capture_output=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert marker.read_text() == "planted code ran\n"
    marker.unlink()
    return out


def plant(entry: Path, vmfb: Path, *, sign_with=None) -> None:
    """Put `vmfb` in the entry with a meta.json whose size and sha256 match (what the checks used to be)."""
    shutil.copy(vmfb, entry / "kernel.vmfb")
    meta = json.loads((entry / "meta.json").read_text())
    data = vmfb.read_bytes()
    meta.update(vmfb_size=len(data), vmfb_sha256=hashlib.sha256(data).hexdigest())
    if sign_with is not None:
        meta = sign_with.seal("entry", meta)
    (entry / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))


def test_a_planted_entry_never_runs_and_is_compiled_anew(user, tmp_path):
    cache, marker = tmp_path / "cache", tmp_path / "PLANTED-CODE-RAN"
    e = env(cache)
    first = boo([CMD, *RUN, "--db", "r.db", "--export", "a.json"], e, tmp_path)
    assert first.returncode == 0, first.stderr
    entry = module(results(tmp_path / "a.json")[CMD]).parent
    plant(entry, planted_vmfb(tmp_path, entry, marker))

    p = boo([CMD, *RUN, "--db", "r.db", "--export", "b.json"], e, tmp_path)
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), "the planted library was loaded"
    r = results(tmp_path / "b.json")[CMD]
    assert r["status"] == "done" and r["numerics"]["verdict"] == "pass", r["error"]
    assert r["compile"]["cache_hit"] is False and module(r).parent == entry      # rebuilt in its place
    assert said(p).count(NOTICE) == 1 and f"kernel cache entry {entry}: no valid signature of yours" in said(p)
    assert "Traceback" not in p.stderr

    again = boo([CMD, *RUN, "--db", "r.db", "--export", "c.json"], e, tmp_path)   # signed now: a plain hit
    assert again.returncode == 0 and NOTICE not in said(again), again.stderr
    assert results(tmp_path / "c.json")[CMD]["compile"]["cache_hit"] is True and not marker.exists()


def test_entries_of_an_older_boo_tui_are_compiled_once_more_said_once(user, tmp_path):
    cache = tmp_path / "cache"
    e = env(cache)
    assert boo([CMD, OTHER, *RUN, "--db", "r.db", "--export", "a.json"], e, tmp_path).returncode == 0
    for r in results(tmp_path / "a.json").values():   # as an earlier version wrote them: no signature
        meta_path = module(r).parent / "meta.json"
        meta = json.loads(meta_path.read_text())
        meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k not in ("mac", "files")}))
    p = boo([CMD, OTHER, *RUN, "--db", "r.db", "--export", "b.json"], e, tmp_path)
    assert p.returncode == 0, p.stderr
    assert said(p).count(NOTICE) == 1, p.stderr   # two such entries, one line
    assert all(not r["compile"]["cache_hit"] and r["status"] == "done" for r in results(tmp_path / "b.json").values())
    p = boo([*CMD.split(), "--iter", "5"], e, tmp_path, prog="boo_engine.cli.driver")   # signed now: hits
    assert p.returncode == 0 and ">>> min=" in p.stdout and NOTICE not in said(p), p.stderr


def test_boo_driver_says_it_once_too(user, tmp_path):
    from boo_engine.targets import Target

    cache = tmp_path / "cache"   # boo-driver's iree backend is BOO's own build of the kernel
    compile_signature(parse_command(CMD), Target("cpu", build="boo"), cache=KernelCache(cache))
    meta_path = next(cache.rglob("meta.json"))
    meta_path.write_text(meta_path.read_text().replace('"mac"', '"old"'))
    p = boo([*CMD.split(), "--iter", "5"], env(cache), tmp_path, prog="boo_engine.cli.driver")
    assert p.returncode == 0 and ">>> min=" in p.stdout, p.stderr
    assert p.stderr.count(NOTICE) == 1 and "boo-driver: warning: kernel cache entry" in p.stderr, p.stderr


# ---- tampering, in-process ---------------------------------------------------------------------------------------
def _edit_meta(d: Path) -> None:
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps(dict(meta, flags=meta["flags"] + ["--iree-opt-level=O0"])))


def _flip_vmfb_byte(d: Path) -> None:
    data = bytearray((d / "kernel.vmfb").read_bytes())
    data[len(data) // 2] ^= 1
    (d / "kernel.vmfb").write_bytes(bytes(data))


def _vmfb_and_its_checksum(d: Path) -> None:
    _flip_vmfb_byte(d)
    meta = json.loads((d / "meta.json").read_text())
    meta["vmfb_sha256"] = hashlib.sha256((d / "kernel.vmfb").read_bytes()).hexdigest()
    (d / "meta.json").write_text(json.dumps(meta))


def _edit_config(d: Path) -> None:
    config = next((d / "configs").iterdir())
    config.write_text(config.read_text() + "// edited\n")


def _edit_command(d: Path) -> None:
    (d / "compile_command.sh").write_text("#!/bin/sh\nexec true  # someone else's command\n")


def _world_writable_vmfb(d: Path) -> None:
    (d / "kernel.vmfb").chmod(0o666)


@pytest.mark.parametrize("tamper", [_edit_meta, _flip_vmfb_byte, _vmfb_and_its_checksum, _edit_config, _edit_command,
                                    _world_writable_vmfb], ids=lambda f: f.__name__.strip("_"))
def test_a_tampered_entry_is_compiled_anew(user, tmp_path, tamper):
    sig, cache = parse_command(CMD), tmp_path / "cache"
    built = compile_signature(sig, "cpu", cache=KernelCache(cache))
    assert compile_signature(sig, "cpu", cache=KernelCache(cache)).cache_hit   # a valid entry of ours is reused
    tamper(Path(built.dir))
    assert lookup_cached(sig, "cpu", cache=KernelCache(cache)) is None
    again = compile_signature(sig, "cpu", cache=KernelCache(cache))
    assert not again.cache_hit and again.dir == built.dir
    assert compile_signature(sig, "cpu", cache=KernelCache(cache)).cache_hit


def test_an_index_record_is_signed_too(user, tmp_path):
    """A forged index record pointing a kernel at another (valid) entry would measure the wrong kernel."""
    cache = KernelCache(tmp_path / "cache")
    a, b = parse_command(CMD), parse_command(OTHER)
    compile_signature(a, "cpu", cache=cache)
    other = compile_signature(b, "cpu", cache=cache)
    record = next(p for p in (cache.root / ".index").rglob("*") if p.is_file()
                  and json.loads(p.read_text())["func_name"] == a.func_name)
    record.write_text(json.dumps({"func_name": b.func_name, "key": other.key}))
    assert lookup_cached(a, "cpu", cache=KernelCache(cache.root)) is None
    assert compile_signature(a, "cpu", cache=KernelCache(cache.root)).func_name == a.func_name


# ---- the key -----------------------------------------------------------------------------------------------------
def test_the_own_key_is_made_on_first_use_private(user, tmp_path):
    KernelCache(tmp_path / "cache")
    st = user.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert stat.S_IMODE(user.parent.stat().st_mode) == 0o700
    assert len(bytes.fromhex(user.read_text().strip())) == 32
    assert not (tmp_path / "cache").joinpath("cache-key").exists()


def _loose(path: Path) -> None:
    path.chmod(0o644)


def _link(path: Path) -> None:
    real = path.with_name("real-key")
    path.rename(real)
    path.symlink_to(real)


def _not_a_key(path: Path) -> None:
    path.write_text("hunter2\n")


def _folder_others_write(path: Path) -> None:
    path.parent.chmod(0o777)


def _someone_elses(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(path, 65534, -1)


@pytest.mark.parametrize("shared", [False, True], ids=["own key", "BOO_CACHE_KEY"])
@pytest.mark.parametrize("spoil, words", [(_loose, "can be read or written by others (mode 0644): chmod 600"),
                                          (_link, "is a symbolic link"),
                                          (_not_a_key, "is not a key (64 hex digits"),
                                          (_folder_others_write, "is in a folder others can write"),
                                          (_someone_elses, "belongs to uid 65534, not to you")],
                         ids=lambda x: x.__name__.strip("_") if callable(x) else "")
def test_a_key_file_that_is_not_safe_is_one_line_exit_2(user, tmp_path, spoil, words, shared):
    key = tmp_path / "team" / "key" if shared else user
    key.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    key.write_text(os.urandom(32).hex() + "\n")
    key.chmod(0o600)
    spoil(key)
    e = env(tmp_path / "cache", **({"BOO_CACHE_KEY": str(key)} if shared else {}))
    for prog, args in (("boo_tui", [CMD, "--headless", "--db", "r.db"]), ("boo_engine.cli.driver", CMD.split())):
        p = boo(args, e, tmp_path, prog=prog)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1, (prog, p.returncode, p.stderr)
        assert f"kernel cache key {key}" in lines[0] and words in lines[0] and "Traceback" not in p.stderr
    assert not (tmp_path / "r.db").exists()


# ---- who else may write ------------------------------------------------------------------------------------------
def test_a_cache_others_can_write_is_not_loaded_from(user, tmp_path):
    """Even an entry signed with the user's key is not loaded from a folder others can write: they could swap the
    file between the check and the load. Said once; the run compiles into a private temporary cache."""
    from boo_engine.compile.trust import cache_key

    cache, marker = tmp_path / "cache", tmp_path / "PLANTED-CODE-RAN"
    built = compile_signature(parse_command(CMD), "cpu", cache=KernelCache(cache))
    entry = Path(built.dir)
    plant(entry, planted_vmfb(tmp_path, entry, marker), sign_with=cache_key())   # what a swap would leave
    cache.chmod(0o777)
    p = boo([CMD, *RUN, "--db", "r.db", "--export", "a.json"], env(cache), tmp_path)
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), "the planted library was loaded"
    r = results(tmp_path / "a.json")[CMD]
    assert r["status"] == "done" and r["numerics"]["verdict"] == "pass" and not r["compile"]["cache_hit"]
    assert not str(module(r)).startswith(str(cache))
    assert said(p).count("is not safe to load code from") == 1, p.stderr
    assert f"kernel cache {cache} is not safe to load code from ({cache} can be written by everyone" in said(p)


def test_a_sticky_folder_above_the_cache_is_fine(user, tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared").chmod(0o1777)   # as /tmp
    cache = KernelCache(tmp_path / "shared" / "cache")
    assert cache.notice is None and cache.root == (tmp_path / "shared" / "cache").resolve()


# ---- a team's key ------------------------------------------------------------------------------------------------
COMPILE = textwrap.dedent("""
    import json, sys
    from boo_engine.commands import parse_command
    from boo_engine.compile.cache import KernelCache, adopt
    from boo_engine.compile.pool import compile_signature
    art = compile_signature(parse_command(sys.argv[1]), "cpu", cache=KernelCache())
    print(json.dumps({"hit": art.cache_hit, "untrusted": art.untrusted}))
""")


def as_user(name: str, tmp_path: Path, cache: Path, key: Path | None = None) -> dict:
    """Compile CMD into `cache` as another user would: a home and config folder of their own."""
    e = env(cache, HOME=str(tmp_path / name), XDG_CONFIG_HOME=str(tmp_path / name / ".config"),
            PYTHONPATH=str(ROOT))
    e.pop("BOO_CACHE_KEY", None)
    if key is not None:
        e["BOO_CACHE_KEY"] = str(key)
    p = subprocess.run([sys.executable, "-c", COMPILE, CMD], env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_team_shares_entries_through_a_shared_key_only(user, tmp_path):
    team_key = tmp_path / "team.key"
    team_key.write_text(os.urandom(32).hex() + "\n")
    team_key.chmod(0o600)
    mine = tmp_path / "one-cache"
    assert as_user("alice", tmp_path, mine)["hit"] is False
    bob = as_user("bob", tmp_path, mine)   # his own key: alice's entry is not his
    assert bob["hit"] is False and "no valid signature of yours" in bob["untrusted"]

    team = tmp_path / "team-cache"
    assert as_user("alice", tmp_path, team, team_key)["hit"] is False
    assert as_user("bob", tmp_path, team, team_key) == {"hit": True, "untrusted": ""}
    team.chmod(0o777)   # a team's folder may be theirs to write: the key's holders are who is trusted
    assert as_user("bob", tmp_path, team, team_key) == {"hit": True, "untrusted": ""}


def test_a_node_sharing_the_folder_with_another_key_is_adopted_only_as_it_said(user, tmp_path, monkeypatch):
    """A Ray node compiling into our folder signs with its own key; we sign its entry anew only when every file is
    what its meta (sent to us over Ray) says."""
    keys = []
    for name in ("node", "driver"):
        k = tmp_path / f"{name}.key"
        k.write_text(os.urandom(32).hex())
        k.chmod(0o600)
        keys.append(k)
    sig, root = parse_command(CMD), tmp_path / "cache"
    monkeypatch.setenv("BOO_CACHE_KEY", str(keys[0]))
    built = compile_signature(sig, "cpu", cache=KernelCache(root))
    monkeypatch.setenv("BOO_CACHE_KEY", str(keys[1]))
    ours = KernelCache(root)
    assert ours.load(built.func_name, built.key) is None
    _edit_config(Path(built.dir))
    assert adopt(ours, built.func_name, built.key, built.meta) is None   # not what the node said
    monkeypatch.setenv("BOO_CACHE_KEY", str(keys[0]))
    built = compile_signature(sig, "cpu", cache=KernelCache(root))      # the node builds it again
    monkeypatch.setenv("BOO_CACHE_KEY", str(keys[1]))
    assert adopt(ours, built.func_name, built.key, built.meta) is not None
    assert KernelCache(root).load(built.func_name, built.key) is not None


def test_a_carried_cache_needs_its_key_on_a_machine_without_a_compiler(user, tmp_path, monkeypatch):
    """The GPU check's path (benchmarks/gpu_check.py): a cache filled here travels with the key that signed it."""
    from test_compile_prebuilt import GEMM, TARGET, _without_compiler

    key = tmp_path / "carried.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    monkeypatch.setenv("BOO_CACHE_KEY", str(key))
    built = compile_signature(parse_command(GEMM), TARGET, cache=KernelCache(tmp_path / "cache"))
    script = textwrap.dedent(f"""
        import json
        from boo_engine.commands import parse_command
        from boo_engine.compile.cache import KernelCache, adopt
        from boo_engine.compile.pool import compile_signature
        from boo_engine.errors import CompileError
        try:
            art = compile_signature(parse_command({GEMM!r}), {TARGET!r}, cache=KernelCache({str(tmp_path / "cache")!r}))
            print(json.dumps({{"key": art.key, "hit": art.cache_hit}}))
        except CompileError as e:
            print(json.dumps({{"error": str(e)}}))
    """)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "gpu-box"))     # another machine's user
    assert _without_compiler(tmp_path, script) == {"key": built.key, "hit": True}
    monkeypatch.delenv("BOO_CACHE_KEY")
    error = _without_compiler(tmp_path, script)["error"]
    assert "\n" not in error and "not signed with your key" in error and "BOO_CACHE_KEY" in error
