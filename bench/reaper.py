#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/reaper.py: a bench's daemons stopped and its work folder removed, even
when the bench itself is killed (SIGKILL, an OOM kill, a lost terminal).

    r = Reaper(work)      # a watcher process in a session of its own
    r.watch(pid)          # a daemon the bench started (RGW's, s3nfsd)
    ...
    r.close()             # the bench's own clean-up is done: the watcher ends

The watcher reads the bench's messages on a pipe. When the pipe closes (the
bench ended, however), it stops every watched process still alive (SIGTERM,
then SIGKILL after 30 s) — only those, each checked by its start time so a
reused PID is left alone — and removes the work folder (a bluestore OSD's
block file, the daemon's data, local copies). After a normal end there is
nothing left to do and it exits at once.
"""
import os
import shutil
import signal
import subprocess
import sys
import time


def _start_time(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class Reaper:
    def __init__(self, work):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), work],
                                     stdin=subprocess.PIPE, start_new_session=True,
                                     text=True)

    def watch(self, pid):
        st = _start_time(pid)
        if st is not None and self.proc.stdin:
            self.proc.stdin.write(f"{pid} {st}\n")
            self.proc.stdin.flush()

    def close(self):
        if self.proc.stdin:
            self.proc.stdin.close()
            self.proc.stdin = None
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            pass


def _signal_all(procs, sig):
    for p, _ in procs:
        try:
            os.kill(p, sig)
        except OSError:
            pass


def main():
    work = sys.argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the bench's
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    watched = []
    for line in sys.stdin:
        pid, st = line.split()
        watched.append((int(pid), st))
    alive = [(p, st) for p, st in watched if _start_time(p) == st]
    _signal_all(alive, signal.SIGTERM)
    end = time.monotonic() + 30
    while alive and time.monotonic() < end:
        time.sleep(0.2)
        alive = [(p, st) for p, st in alive if _start_time(p) == st]
    _signal_all(alive, signal.SIGKILL)
    if alive:
        time.sleep(1)
    if alive or os.path.exists(work):
        sys.stderr.write(f"bench reaper: stopped {len(alive)} leftover daemon(s), "
                         f"removing {work}\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
