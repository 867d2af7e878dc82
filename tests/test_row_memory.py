"""What a session holds per line of a big commands file, and what it makes to plan one (issue 24, item 6). Counted,
not timed: bytes per job (tracemalloc), objects shared or not, the garbage collector's collections, the memory an
export takes beside the results; each next to the figure it had before."""
from __future__ import annotations

import ast
import datetime
import gc
import json
import random
import shlex
import tracemalloc
import warnings
from pathlib import Path

import pytest

from boo_engine import jsondoc
from boo_engine.commands import parse_invocation, split_words
from boo_engine.commands.aten import _literal_list
from boo_engine.commands.command import _join
from boo_engine.comparisons import compare_results
from boo_engine.errors import CommandError
from boo_engine.exporters import export_results, render_csv
from boo_engine.results import DONE, FAILED, JobResult
from boo_engine.session import Session, SessionConfig


def distinct_convs(n: int) -> list[str]:
    return [f"conv -n 1 -c {1 + i % 64} -H {4 + i // 4096} -W {4 + i // 4096} -k {1 + (i // 64) % 64} -y 3 -x 3 -p 1 "
            f"-q 1 --iter 5" for i in range(n)]


def bad_lines(n: int) -> list[str]:
    return [f"conv -n 1 -c {i} -H x{i} -W 8 -k 4" for i in range(n)]


@pytest.fixture
def session(tmp_path):
    s = Session(SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"),
                              command_line="t"))
    s.environment()
    s.add_command("conv -n 1 -c 3 -H 8 -W 8 -k 4 -y 3 -x 3")   # (what a first line imports and caches)
    yield s
    s.close()


def planned(session: Session, path: Path) -> tuple[float, float]:
    """(bytes kept per job, the most held at once while planning beyond what is kept, as a fraction of it)."""
    gc.collect()
    jobs_before = len(session.jobs)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        session.add_inputs([str(path)])
        gc.collect()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (kept - before) / (len(session.jobs) - jobs_before), (peak - kept) / (kept - before)


def test_a_job_of_a_distinct_line_holds_a_third_less(session, tmp_path):
    """5,000 distinct convs (two jobs each): 1,752 bytes a job before (a Command kept the line's words, each
    signature six size tuples of its own), ~1,190 now."""
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(distinct_convs(5000)) + "\n")
    per_job, transient = planned(session, path)
    print(f"{per_job:.0f} bytes a job; planning held {transient:.0%} more at its peak")
    assert per_job < 1400, per_job


def test_planning_bad_lines_holds_little_beside_their_jobs(session, tmp_path):
    """5,000 bad lines: every line's CommandLine was held until the last was read (33% above what the jobs keep);
    now a line at a time (~13%), and the first word of each is one string."""
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(bad_lines(5000)) + "\n")
    per_job, transient = planned(session, path)
    print(f"{per_job:.0f} bytes a job; planning held {transient:.0%} more at its peak")
    assert transient < 0.2, transient
    ops = {id(r.op) for r in session.jobs.values() if r.status == FAILED}
    assert len(ops) == 1, len(ops)


def test_the_collector_does_not_run_while_a_file_is_planned(session, tmp_path):
    """Every collection walks every object alive, and planning makes only objects that live on: 20-25% of the
    time of 50,000 distinct lines. 3,000 lines took ~130 collections; now at most the one after, the collector on
    again."""
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(distinct_convs(3000)) + "\n")
    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        session.add_inputs([str(path)])
    finally:
        gc.callbacks.remove(count)
    assert len(collections) <= 1 and gc.isenabled(), collections


def test_what_a_file_made_is_frozen_until_its_session_closes(tmp_path):
    """After the pause the collector's first collection walked every object planning made (1.4 s after 200,000
    lines) and every full one after again: they are frozen instead (left to refcounting), and handed back to the
    collector when the session closes."""
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(distinct_convs(3000)) + "\n")
    s = Session(SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"),
                              command_line="t"))
    try:
        gc.unfreeze()
        few = tmp_path / "few.txt"
        few.write_text("\n".join(distinct_convs(5)) + "\n")
        gc.collect()
        s.add_inputs([str(few)])   # a pause that made little: nothing frozen
        assert gc.get_freeze_count() == 0
        s.add_inputs([str(path)])
        assert gc.get_freeze_count() > 6000, gc.get_freeze_count()   # (another thread's objects may be young)
    finally:
        s.close()
    assert gc.get_freeze_count() == 0


def test_a_process_that_planned_leaves_without_walking_its_objects(tmp_path):
    """The interpreter's last collections walked every object alive (4.5 s after a 200,000-line file, for no cycle
    an exit needs freed): a process that planned a file leaves with them frozen."""
    import subprocess
    import sys

    path = tmp_path / "lines.txt"
    path.write_text("\n".join(distinct_convs(500)) + "\n")
    script = f"""
import atexit, gc
atexit.register(lambda: print("frozen at exit", gc.get_freeze_count()))   # runs last (atexit is LIFO)
from boo_engine.session import Session, SessionConfig
s = Session(SessionConfig(target="cpu", db_path={str(tmp_path / "r.db")!r}, cache_dir={str(tmp_path / "c")!r},
                          command_line="t"))
s.add_inputs([{str(path)!r}])
s.close()
print("frozen after close", gc.get_freeze_count())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout
    counts = dict(line.rsplit(" ", 1) for line in out.splitlines() if line.startswith("frozen"))
    assert int(counts["frozen after close"]) == 0 and int(counts["frozen at exit"]) > 1000, out


def test_a_command_keeps_its_text_not_its_words_and_shares_its_sizes():
    lines = ["conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 3 -x 3 -p 1 -q 1 --iter 7", "gemm --a_w 32 --a_h 16 --b_w 8",
             "conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 3 -x 3 -p 1 -q 1 --in_layout 'NHWC' --out_layout NHWC "
             "--fil_layout NHWC",
             'aten::mm "[[8, 16], [16, 4]]" "[\'float\', \'float\']" "[[16, 1], [4, 1]]" "[\'\', \'\']"',
             "layernorm --input 4x8 --eps 1e-5 --input-permutation 1 0"]
    for line in lines:
        words = [w for w in split_words(line)]
        command = parse_invocation(words)
        assert "tokens" not in command.__dataclass_fields__
        assert list(command.tokens) == [w for w in words if w not in ("--iter", "7")], line
    a, b = (parse_invocation(f"conv -n 1 -c {c} -H 9 -W 9 -k 4 -y 3 -x 3 -p 1 -q 1").signature for c in (3, 5))
    assert a.stride is b.stride and a.padding is b.padding and a.fil_spatial is b.fil_spatial


def test_a_command_text_is_what_shlex_join_makes():
    random.seed(24)
    alphabet = ["a", "-", " ", "'", '"', "", "x=1", "\u00e9", "\t", "\n", "%", "@", "/", ".", ",", ":", "+", "$", "\\"]
    for _ in range(20000):
        words = ["".join(random.choice(alphabet) for _ in range(random.randint(0, 4)))
                 for _ in range(random.randint(1, 5))]
        assert _join(words) == shlex.join(words), words


def test_an_aten_list_reads_as_literal_eval_reads_it():
    """Plain int lists and plain quoted strings skip literal_eval (5-10x faster); anything else is its, errors too."""
    def literal(text):
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return "error"
        return value if isinstance(value, list) else "error"

    def ours(text):
        try:
            return _literal_list("mm", "Input Dims", text)
        except CommandError:
            return "error"

    random.seed(6)
    alphabet = ["[", "]", "'", ",", " ", "1", "0", "-", "a", "\\", "\n", "\r", "\0", "\t", '"', "e", "::", "[[", "]]"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # (literal_eval of "'\\e'": an invalid escape)
        for _ in range(50000):
            text = "".join(random.choice(alphabet) for _ in range(random.randint(0, 12)))
            text = "[" + text + "]" if random.random() < 0.5 else text
            assert ours(text) == literal(text), text
    for text in ("[1, 2]", "[[1, 2], []]", "[1,]", "[01]", "[- 1]", "[]", "['a', 'b']", "['a' 'b']", "['a',]",
                 "['a\rb']", "['a\x00']", "['a\\'b']", "['a\\nb']", " [ 'c10::Half' , 'float' ] ", "['\u00e9']"):
        assert ours(text) == literal(text), text
    assert ours("[" * 100000 + "]" * 100000) == "error"


def results(n: int) -> list[JobResult]:
    """n results of one command per pair: a measured baseline and variant (samples, stats) and failed lines."""
    from boo_engine.bench.stats import compute_stats

    out = []
    for i in range(n):
        if i % 3 == 2:
            out.append(JobResult(job_id=f"b{i}", command=f"conv -c {i} -H x", func_name="", op="conv", variant="-",
                                 target="cpu", backend="-", status=FAILED, error=f"f.txt:{i}: conv: -H expects"))
            continue
        samples = [10.0 + (i % 7) * 0.1 + k * 0.01 for k in range(50)]
        out.append(JobResult(job_id=f"j{i}", command=f"gemm --a_w {i // 3}", func_name=f"gemm_{i // 3}", op="gemm",
                             variant="baseline" if i % 3 == 0 else "o1", target="cpu", backend="iree", status=DONE,
                             stats=compute_stats(samples), samples_us=samples, source=f"f.txt:{i}"))
    return out


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_an_export_is_written_a_row_at_a_time_and_is_the_same_text(tmp_path, monkeypatch, suffix):
    """The export of 6,000 results takes about what that of 1,500 takes beside the results (its whole text, and
    for JSON every result as a dict twice over, grew with the run), and its bytes are the text render_* make."""
    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(jsondoc.datetime, "datetime", Frozen)

    def export_peak(n: int) -> int:
        rs = results(n)
        comparisons = compare_results(rs)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            export_results(tmp_path / f"{n}{suffix}", rs, comparisons=comparisons, model=[])
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        want = (render_csv(rs, comparisons, []) if suffix == ".csv" else
                jsondoc.render_json(rs, environment=None, run=None,
                                    comparisons=comparisons, model=[]))
        assert (tmp_path / f"{n}{suffix}").read_bytes() == want.encode("utf-8")
        if suffix == ".json":
            json.loads(want)
        return peak

    small, large = export_peak(1500), export_peak(6000)
    print(f"{suffix}: {small / 1e6:.2f} MB to export 1,500 results, {large / 1e6:.2f} MB for 6,000")
    assert large < 1.5 * small, (small, large)
