"""Run a command while every core is kept busy, to find tests that only hold on an idle machine.

    .venv/bin/python tests/load.py -- make test
    .venv/bin/python tests/load.py --runs 3 -- .venv/bin/pytest -q tests/e2e/test_bootstrap.py

Starts one CPU-bound worker process per core (a tight hashing loop, normal priority), runs the
command (``--runs N`` times, one after another), and prints each run's exit status and wall time
("run 1: exit 0, 412 s") and a summary. The workers are stopped when the command ends, also on
Ctrl-C, SIGTERM or an error; each worker also exits by itself as soon as this script is gone
(its parent changes), so none is left even if this script is killed with SIGKILL.
Exit status: 0 if every run exited 0, else 1 (130 if interrupted).

Not a test module (its name does not match test_*.py): pytest does not collect it.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

# A tight CPU-bound loop; checks every ~50 ms that its parent (this script) still lives.
WORKER = """\
import hashlib, os, sys, time
parent = int(sys.argv[1])
block = os.urandom(1 << 16)
check = time.monotonic()
while True:
    for _ in range(64):
        block = hashlib.sha256(block).digest() * 2048
    now = time.monotonic()
    if now - check > 0.05:
        if os.getppid() != parent:
            sys.exit(0)
        check = now
"""


class Stop(Exception):
    """SIGTERM or SIGHUP arrived: stop the command and the workers, then exit."""


def _raise_stop(signum: int, _frame: object) -> None:
    raise Stop(signal.Signals(signum).name)


def start_workers(count: int) -> list[subprocess.Popen[bytes]]:
    # Their own session: a terminal's Ctrl-C goes to the command, and the workers are stopped here.
    return [subprocess.Popen([sys.executable, "-c", WORKER, str(os.getpid())], stdin=subprocess.DEVNULL,
                             start_new_session=True) for _ in range(count)]


def stop(procs: list[subprocess.Popen[bytes]], grace: float = 5.0) -> None:
    """Terminate, wait up to `grace` seconds, then kill what is left; reap every one."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_once(command: list[str]) -> int:
    """Run the command in this process group (so a terminal's Ctrl-C reaches it too); its exit status."""
    proc = subprocess.Popen(command)
    try:
        return proc.wait()
    except BaseException:  # Ctrl-C, SIGTERM: give it a moment to clean up, then make sure it is gone
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop([proc], grace=10)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--runs N] [--workers K] -- COMMAND ...")
    parser.add_argument("--runs", type=int, default=1, help="run the command N times (default 1)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="CPU-bound worker processes (default: one per core, %(default)s here)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    if args.runs < 1 or args.workers < 0:
        parser.error("--runs must be >= 1 and --workers >= 0")

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGHUP, _raise_stop)
    results: list[tuple[int, float]] = []
    workers: list[subprocess.Popen[bytes]] = []
    try:
        workers = start_workers(args.workers)
        print(f"load: {len(workers)} CPU-bound worker(s) on {os.cpu_count()} core(s); "
              f"running {' '.join(command)!r} {args.runs} time(s)", flush=True)
        for run in range(1, args.runs + 1):
            if dead := [w for w in workers if w.poll() is not None]:  # keep the load on: replace any that died
                workers = [w for w in workers if w not in dead] + start_workers(len(dead))
            started = time.monotonic()
            code = run_once(command)
            seconds = time.monotonic() - started
            results.append((code, seconds))
            print(f"run {run}: exit {code}, {seconds:.0f} s", flush=True)
    except (KeyboardInterrupt, Stop) as why:
        print(f"load: interrupted ({str(why) or 'Ctrl-C'}) after {len(results)} complete run(s)", flush=True)
        return 130
    finally:
        stop(workers)

    failed = [i for i, (code, _) in enumerate(results, 1) if code != 0]
    times = [s for _, s in results]
    print(f"load: {len(results)} run(s), {len(results) - len(failed)} passed, {len(failed)} failed"
          + (f" (run {', '.join(map(str, failed))})" if failed else "")
          + f"; wall time min {min(times):.0f} s, median {statistics.median(times):.0f} s, max {max(times):.0f} s",
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
