"""One writer per run folder, tried as a user would: the same command twice, and a kill.

Two real ``python -m frames_dspy.evaluate`` processes start half a second apart on one
``--out`` against ``tests/fault_server.py`` (no faults, a little latency so a run lasts a few
seconds): one must run every question exactly once, the other must be refused with one line
naming the first and exit 2 before any LM call. A run killed with SIGKILL must leave no stale
lock: the same command then resumes it. ``optimize.compile``'s output folder is held the same
way, and its ``--workers-only`` processes still share it.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from opt_helpers import quiet_optuna, run_tiny  # noqa: F401 (quiet_optuna: an autouse fixture)

from frames_dspy.base.locks import FolderInUse, holder_of
from tests.base.test_locks import _hold, _stop
from tests.commands.test_faults import _data, _records, kill_once_recorded
from tests.fault_server import MODEL, FaultServer, evaluate_command

N_QUESTIONS = 20
CONDITIONS = ("naive", "bm25-2")
KEYS = {(c, i) for c in CONDITIONS for i in range(N_QUESTIONS)}


def _command(server: FaultServer, data: tuple[Path, Path], out: Path) -> list[str]:
    dataset, corpus = data
    return evaluate_command(
        server,
        "--dataset", str(dataset), "--corpus", str(corpus), "--distractors", "none",
        "--conditions", ",".join(CONDITIONS), "--limit", str(N_QUESTIONS), "--out", str(out),
    )  # fmt: skip


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _check_complete(out: Path) -> None:
    """Every (condition, question) recorded exactly once, and the table says n = 20."""
    keys = Counter((r["condition"], r["id"]) for r in _records(out))
    assert set(keys) == KEYS and set(keys.values()) == {1}, keys.most_common(3)
    summary = json.loads((out / "summary.json").read_text())
    for condition in CONDITIONS:
        assert summary[condition]["n"] == N_QUESTIONS
        assert summary[condition]["duplicates_ignored"] == 0
    table = (out / "table.md").read_text()
    assert all(f"| {c} | {N_QUESTIONS} |" in table for c in CONDITIONS)


def test_two_runs_started_together_on_one_folder_one_is_refused(tmp_path, env):
    data = _data(tmp_path, N_QUESTIONS, set())
    out = tmp_path / "run"
    # 40 answers at 0.2 s: the winner still runs when the loser, half a second behind, starts.
    with FaultServer(p_500=0, p_429=0, p_stall=0, latency=0.2, lifetime=300) as server:
        command = _command(server, data, out)
        first = _start(command, env)
        time.sleep(0.5)
        second = _start(command, env)
        results = {p: p.communicate(timeout=300) for p in (first, second)}
    codes = sorted(p.returncode for p in results)
    assert codes == [0, 2], {p.returncode: err[-2000:] for p, (_, err) in results.items()}
    winner = next(p for p in results if p.returncode == 0)
    loser = next(p for p in results if p.returncode == 2)
    _, err = results[loser]
    print(f"\nrace: the loser (pid {loser.pid}) said: {err.strip()}")
    # One line, naming the holder and the fix; nothing else (no estimate: no LM call).
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: run folder {out} is in use by pid {winner.pid} on ")
    # The holder's command as typed (its interpreter is python or python3, as pytest was run).
    assert f" -m frames_dspy.evaluate --model {MODEL} --api-base {server.url}" in err
    assert err.strip().endswith(
        "wait for it to finish (then rerun to resume), or choose another --out"
    )
    _check_complete(out)


def test_a_killed_holder_leaves_no_stale_lock_and_the_run_resumes(tmp_path, env):
    data = _data(tmp_path, N_QUESTIONS, set())
    out = tmp_path / "run"
    with FaultServer(p_500=0, p_429=0, p_stall=0, latency=0.1, lifetime=300) as server:
        command = _command(server, data, out)
        first = _start(command, env)
        before = kill_once_recorded(first, out, 5, within=120)
        assert 5 <= before < len(KEYS)
        assert holder_of(out)["pid"] == first.pid  # the file stays; its lock died with it
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "in use" not in second.stderr
    assert holder_of(out)["pid"] not in (None, first.pid)  # the resume held it in turn
    _check_complete(out)


def test_a_compile_output_folder_in_use_is_refused_but_workers_join(tiny, tmp_path):
    out = tmp_path / "opt"
    holder = _hold(out)
    try:
        with pytest.raises(FolderInUse) as info:
            run_tiny(tiny, out, trials=1, test_limit=1)
        message = str(info.value)
        assert message.startswith(f"output folder {out} is in use by pid {holder.pid} on ")
        assert message.endswith("or add --workers-only to run trials for it")
        # A worker shares the folder (and its study) with the main command that holds it.
        result, _ = run_tiny(tiny, out, trials=1, workers_only=True)
        assert result.complete_trials == 1
    finally:
        _stop(holder)
