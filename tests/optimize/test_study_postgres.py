"""optimize.compile on a real PostgreSQL server: two workers, one killed mid-trial, a rerun.

The server comes from, in order: ``FRAMES_TEST_POSTGRES_URL`` (CI's ``.ci/run`` starts one and
sets it); a throwaway cluster made with Debian's ``postgresql`` binaries
(``/usr/lib/postgresql/*/bin``); a throwaway cluster from the ``pgserver`` wheel (in the ``dev``
extra). With none of them the test is skipped saying how to get one (failed under ``CI=true``,
see :mod:`tests.needs`). Each run uses a study name of its own and deletes the study afterwards,
so a shared server keeps no old studies in the way.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from optimize.study import count_active

FIXTURES = Path(__file__).parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))

from opt_helpers import run_tiny  # noqa: E402

from tests.needs import missing  # noqa: E402
from tests.ports import free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = FIXTURES / "opt_run_study.py"

TARGET = 6  # trials the study should end with
# Seconds per fake LM call; a trial makes 6-24 calls. The survivor is the slower worker, so it
# cannot reach the target before the victim is killed inside its second trial.
VICTIM_DELAY, SURVIVOR_DELAY = 0.1, 0.2

HOW_TO_GET_A_SERVER = (
    "no PostgreSQL server for this test: set FRAMES_TEST_POSTGRES_URL="
    "postgresql://user:password@127.0.0.1:5432/dbname (a role that may create tables there), "
    "or install Debian's server (`apt-get install postgresql`; its initdb is used from "
    "/usr/lib/postgresql/*/bin), or the `pgserver` wheel (`pip install -e '.[dev]'`)"
)


# --- where the server comes from ----------------------------------------------------------------


def _runuser() -> str | None:
    """``runuser``, which lets root run the server as postgres; it lives in an sbin folder,
    which a user's PATH may leave out."""
    return shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")


@contextlib.contextmanager
def _debian_cluster(bin_dir: Path) -> Iterator[str]:
    """A throwaway cluster in a temporary folder, on 127.0.0.1 and a free port."""
    folder = Path(tempfile.mkdtemp(prefix="frames-pg-"))
    data, log, pw_file = folder / "data", folder / "server.log", folder / "pw"
    password = secrets.token_hex(8)
    pw_file.write_text(password + "\n")
    # The server refuses to run as root: then every server command runs as the postgres user.
    as_user = []
    if os.geteuid() == 0:
        as_user = [str(_runuser()), "-u", "postgres", "--"]
        owner = pwd.getpwnam("postgres")
        for path in (folder, pw_file):
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def run(*command: str) -> None:
        done = subprocess.run(
            [*as_user, *command], cwd=folder, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} exited {done.returncode}: "
                f"{done.stderr}{done.stdout}{server_log}"
            )

    pg_ctl = str(bin_dir / "pg_ctl")
    try:
        run(
            str(bin_dir / "initdb"),
            f"--pgdata={data}",
            "--username=frames",
            f"--pwfile={pw_file}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        port = free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off"
        run(pg_ctl, "start", "-w", "-D", str(data), "-l", str(log), "-o", options)
        try:
            yield f"postgresql://frames:{password}@127.0.0.1:{port}/postgres"
        finally:
            run(pg_ctl, "stop", "-m", "immediate", "-D", str(data))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _pgserver_cluster() -> Iterator[str]:
    """A throwaway cluster from the ``pgserver`` wheel's own binaries (on a Unix socket)."""
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="frames-pgserver-"))
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    url = os.environ.get("FRAMES_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    initdb = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    if initdb and (os.geteuid() != 0 or _runuser()):
        with _debian_cluster(Path(initdb[-1]).parent) as url:
            yield url
        return
    try:
        import pgserver  # noqa: F401
    except ImportError:
        missing(HOW_TO_GET_A_SERVER)
    with _pgserver_cluster() as url:
        yield url


# --- the workers --------------------------------------------------------------------------------


def _spawn(out: Path, storage: str, study: str, *extra: str, delay: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--out", str(out), "--trials", str(TARGET)]
        + ["--storage", storage, "--study-name", study, "--delay", str(delay), *extra],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _worker(process: subprocess.Popen) -> str:
    """The ``worker`` attribute the process writes on its trials (optimize.study.worker_id)."""
    return f"{socket.gethostname()}:{process.pid}"


def _trials(storage: optuna.storages.BaseStorage, study: str) -> list[FrozenTrial]:
    return optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)


def _kill_inside_a_trial(
    process: subprocess.Popen, storage: optuna.storages.BaseStorage, study: str
) -> tuple[int, list[int]]:
    """SIGKILL ``process`` once it has finished a trial and is 0.3 s into scoring another.

    Returns:
        The number of the trial it was killed in, and those of the trials it had completed.
    """
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        mine = [
            t for t in _trials(storage, study) if t.user_attrs.get("worker") == _worker(process)
        ]
        done = [t.number for t in mine if t.state == TrialState.COMPLETE]
        # Optuna stamps datetime_start with the worker's datetime.now(): same host, same clock.
        scoring = [
            t.number
            for t in mine
            if t.state == TrialState.RUNNING
            and "label" in t.user_attrs  # past the surplus check and the sampler
            and (datetime.now() - t.datetime_start).total_seconds() > 0.3
        ]
        if done and scoring:
            # Freeze the worker, then make sure the trial did not finish in the meantime.
            process.send_signal(signal.SIGSTOP)
            time.sleep(0.05)  # a commit already sent lands before we look
            if _trials(storage, study)[scoring[0]].state == TrialState.RUNNING:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=10)
                return scoring[0], done
            process.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError(f"worker {_worker(process)} never got into a second trial")


# --- the test -----------------------------------------------------------------------------------


def test_killed_worker_is_reaped_and_the_study_resumes_on_postgres(postgres_url, tmp_path):
    study = f"frames-pg-{uuid.uuid4().hex[:12]}"
    worker = ("--workers-only",)
    victim = _spawn(tmp_path / "victim", postgres_url, study, *worker, delay=VICTIM_DELAY)
    survivor = _spawn(tmp_path / "survivor", postgres_url, study, *worker, delay=SURVIVOR_DELAY)
    processes = [victim, survivor]
    # A hung child must not hang the suite: kill whatever still runs after two minutes.
    watchdog = threading.Timer(120, lambda: [p.kill() for p in processes if p.poll() is None])
    watchdog.start()
    storage = None
    try:
        first_line = victim.stdout.readline()  # printed once the study is open (tables made)
        assert first_line.startswith("study "), first_line + victim.communicate()[1]
        storage = optuna.storages.RDBStorage(postgres_url)

        killed_number, victim_done = _kill_inside_a_trial(victim, storage, study)

        stdout, stderr = survivor.communicate(timeout=90)
        assert survivor.returncode == 0, stderr
        assert f"done: {TARGET} complete" in stdout, stdout

        trials = _trials(storage, study)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        assert len(complete) == TARGET, [(t.number, t.state.name) for t in trials]
        assert not [t for t in trials if t.state == TrialState.RUNNING]
        # The killed trial is FAIL, marked so by the surviving worker when it next counted.
        killed = trials[killed_number]
        assert killed.state == TrialState.FAIL
        assert killed.user_attrs["reaped"] == f"worker {_worker(victim)} had died"
        assert killed.user_attrs["reaped_by"] == _worker(survivor)
        # No trial lost: the victim's finished trials stand, the survivor ran the rest.
        ran_by = {t.number: t.user_attrs["worker"] for t in complete}
        assert [n for n, w in ran_by.items() if w == _worker(victim)] == victim_done
        assert [w for w in ran_by.values() if w != _worker(victim)] == [_worker(survivor)] * (
            TARGET - len(victim_done)
        )
        # None counted twice: anything else is a trial begun after the target was met.
        others = [t for t in trials if t not in complete and t.number != killed.number]
        assert all(t.user_attrs.get("surplus") for t in others), others

        # The main command on the same study adds nothing and does the final step.
        main = _spawn(tmp_path / "main", postgres_url, study, delay=0.0)
        processes.append(main)
        stdout, stderr = main.communicate(timeout=90)
        assert main.returncode == 0, stderr
        assert f"{TARGET} trial(s) so far, 0 to run" in stdout, stdout
        after = _trials(storage, study)
        assert [(t.number, t.state) for t in after] == [(t.number, t.state) for t in trials]
        assert (tmp_path / "main" / "test_score.json").is_file()
    finally:
        watchdog.cancel()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        if storage is not None:
            with contextlib.suppress(KeyError):
                optuna.delete_study(study_name=study, storage=storage)
            storage.engine.dispose()


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used:UserWarning")
def test_a_dead_worker_on_another_host_stops_counting_after_the_grace_period(postgres_url):
    # optimize.compile uses heartbeat_interval=30, grace_period=120; the same, scaled down.
    storage = optuna.storages.RDBStorage(postgres_url, heartbeat_interval=1, grace_period=1)
    name = f"frames-pg-{uuid.uuid4().hex[:12]}"
    try:
        study = optuna.create_study(
            storage=storage, study_name=name, directions=["maximize", "minimize"]
        )
        trial = study.ask()
        trial.set_user_attr("worker", "another-host:4242")  # not this host: no local reaping
        study_id = storage.get_study_id_from_name(name)
        storage.record_heartbeat(storage.get_trial_id_from_study_id_trial_number(study_id, 0))
        assert count_active(study) == 1  # a fresh heartbeat: the worker may be alive
        time.sleep(2.5)
        assert count_active(study) == 0
        assert study.trials[0].state == TrialState.FAIL
    finally:
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name, storage=storage)
        storage.engine.dispose()


def test_a_missing_driver_names_the_extra_to_install(tiny, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    storage = "postgresql://frames:secret@127.0.0.1:5432/frames_test"
    with pytest.raises(ValueError, match=r'driver.*pip install -e "\.\[postgres\]"') as info:
        run_tiny(tiny, tmp_path, trials=1, storage=storage)
    assert "secret" not in str(info.value)
