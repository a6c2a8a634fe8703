#!/usr/bin/env python3
# Fault-injection driver and checker: runs fault_worker processes against one backend, injects faults, checks.
"""Runs K lock workers (fenced writes) and then 16 inventory workers per strategy against one
database URL while injecting faults (SIGKILL of holders, SIGSTOP past the TTL, killed server
connections, server restarts, clock-skewed clients, kills inside SQLite write transactions), then
reads every per-process log and the database and checks the guarantees. Prints one summary line;
exits 1 on any violation. Standard library only."""

import argparse
import json
import bisect
import glob
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import check_history  # noqa: E402  (the history checker, tests/fault/check_history.py)
from check_history import Violations, base_name  # noqa: E402  (one definition for the driver and the checker)

FAKETIME_LIB_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
]


def proc_state(pid):
    """The one-letter state of process `pid` (/proc/PID/stat: R, S, D, T, Z, ...), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def now_us():
    return time.monotonic_ns() // 1000  # CLOCK_MONOTONIC, the clock the workers log


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (e.g. 90s, 10m)")
    n = float(m.group(1))
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


class ThreadView:
    """One lock loop of a worker process, for the checkers: the process itself (--threads 1) or one
    of its threads (--threads N: thread k >= 1 logs to <log>.t<k>). `who` tells loops apart (the
    overlap checks compare it), `pid` is the process's (kills and stops hit every thread of it)."""

    def __init__(self, proc, k):
        self.proc = proc
        self.pid = proc.pid
        self.k = k
        self.who = (proc.pid, k)
        self.index = proc.index if k == 0 and proc.threads == 1 else f"{proc.index}.{k}"
        self.log_path = proc.log_path if k == 0 else f"{proc.log_path}.t{k}"
        self.skew = getattr(proc, "skew", None)
        self.holder_label = getattr(proc, "holder_label", None)


def views_of(procs):
    return [ThreadView(p, k) for p in procs for k in range(getattr(p, "threads", 1))]


class Proc:
    """One worker process with its own log file, read incrementally to follow its state."""

    def __init__(self, slot, index, popen, log_path, skew):
        self.slot = slot
        self.index = index
        self.popen = popen
        self.pid = popen.pid
        self.log_path = log_path
        self.skew = skew
        self.offset = 0
        self.partial = ""
        self.state = None  # last record type: A (holding), X (in write tx), W, R, N, E...
        self.holding = None  # (name, token) of the last A line
        self.last_progress = now_us()
        self.stopped_until = None
        self.stop_seen = None  # CLOCK_MONOTONIC µs when last seen stopped (SIGSTOP)
        self.killed_by_us = False
        self.stall_reported = False
        self.exit_code = None
        self.threads = 1  # lock loops in the process (--threads), each a ThreadView for the checkers
        self.acks = 0  # acknowledged acquire/release operations seen in the log
        self.last_ack = None  # (op, name, token, t_us) of the latest

    def poll_log(self):
        try:
            with open(self.log_path, "r", encoding="utf-8", errors="replace") as f:
                f.seek(self.offset)
                data = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return
        if not data:
            return
        self.last_progress = now_us()
        data = self.partial + data
        lines = data.split("\n")
        self.partial = lines.pop()
        for line in lines:
            parts = line.split("\t")
            if not parts or not parts[0]:
                continue
            if parts[0] == "O":  # the operation history, read by the history checker
                # O t phase op name token detail: remember acknowledged acquisitions and releases
                # (the crash_after_ack class crashes the server right after one).
                # A reader-writer hold (<prefix>_rwN, read or write) is one too: its derived rows
                # (writer, readers, fence) are judged together (check_after_crash). So is a fair
                # hold (<prefix>_fair0): its lock row is the name's own (a fair release hands it
                # over with a new token, never the old one).
                if len(parts) >= 6 and parts[2] == "ok" and parts[3] in ("acquire", "release"):
                    self.acks += 1
                    self.last_ack = (parts[3], parts[4], int(parts[5]), int(parts[1]))
                continue
            self.state = parts[0]
            if parts[0] == "A":
                self.holding = (parts[1], int(parts[2]))
            elif parts[0] == "R":
                self.holding = None


def replace_url_host(url, host, port):
    """`url` with host[:port] replaced, user-info, path and query kept (postgresql://, mysql://)."""
    u = urllib.parse.urlsplit(url)
    userinfo = u.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"{host}:{port}"
    return urllib.parse.urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


class ProxyCtl:
    """One fault_proxy process (tests/fault/fault_proxy_main.cpp) in front of the server, driven
    over its stdin: each command line is answered by one line ("ok ..." or "error: ...")."""

    def __init__(self, binary, host, port, log_path):
        self.stderr = open(log_path, "w")
        self.popen = subprocess.Popen([binary, "--upstream", f"{host}:{port}"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self.stderr, text=True, bufsize=1)
        first = self.popen.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            raise RuntimeError(f"fault_proxy did not start: {first}")
        self.port = int(first[1])
        self.pid = self.popen.pid
        self.fault = None  # the proxy fault in force: dict(kind, until, ev, ...) or None

    def cmd(self, line):
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()
        answer = self.popen.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"fault_proxy {line!r}: {answer!r}")
        return answer

    def close(self):
        try:
            self.popen.stdin.write("quit\n")
            self.popen.stdin.flush()
            self.popen.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.popen.kill()
            self.popen.wait()
        self.stderr.close()


PROXY_KINDS = ("partition", "lose_answer", "delay", "cut")
CRASH_KINDS = ("crash", "crash_after_ack")
ALL_KINDS = ("kill", "kill_mid_tx", "stop", "conn_kill", "conn_kill_mid_tx", "restart") + CRASH_KINDS + PROXY_KINDS


def permit_row_name(semaphore, slot):
    """The lock-table row of permit `slot` of `semaphore`: src/core/permit_name.cpp's derivation
    ("sqllock.semaphore.<bytes>.<S>.permit.<k>", padded with '.' to 256 bytes)."""
    out = f"sqllock.semaphore.{len(semaphore.encode())}.{semaphore}.permit.{slot}"
    return out + "." * max(0, 256 - len(out.encode()))


RW_NAME = re.compile(r"_rw\d+(@\d+)?$")  # the reader-writer shape's names (fault_worker.cpp)
FAIR_NAME = re.compile(r"_fair\d+(@\d+)?$")  # the fair shape's name (fault_worker.cpp)
# The fair shape's ticket TTL (fault_worker.cpp leaves lease_options::fair_ticket_ttl at the library's
# default; each fair invoke logs it as ticket_ttl=): how long a waiter's ticket outlives its last poll.
FAIR_TICKET_TTL_US = 2_000_000


def rw_rows_range(name):
    """[lo, hi) holding every lock-table row of reader-writer lease `name` (writer, readers, fence)
    and nothing else, bytewise: src/core/rw_name.cpp's rw_rows_range ("sqllock.rwlock.<bytes>.<L>.")."""
    lo = f"sqllock.rwlock.{len(name.encode())}.{name}."
    return lo, lo[:-1] + "/"


def rw_fence_row(name):
    """The fence row of reader-writer lease `name` (rw_name.cpp): its token is the name's counter."""
    out = f"sqllock.rwlock.{len(name.encode())}.{name}.fence"
    return out + "." * max(0, 256 - len(out.encode()))


def judge_rw_rows(op, token, rows, fence):
    """A reader-writer lease's rows after a crash: `rows` maps row name -> (token, held) for the
    writer, reader and fence rows of the name. Returns (judged, violation or None). Rows are kept on
    release, each acquisition writes its token into its own row (writer, or its client's reader row)
    and advances the fence (the name's counter) in the same statement, and readers share the name:
    another reader acquiring since says nothing of this one. So an acknowledged acquisition passes
    when a row carries its token, and is lost when none does and the fence is below it (a later
    token overwriting that very row is not judged); an acknowledged release is judged when its row
    still carries the token, and lost when that row is still held."""
    lease_rows = [v for n, v in rows.items() if n != fence]
    mine = [held for t, held in lease_rows if t == token]
    fence_token = rows[fence][0] if fence in rows else None
    if op == "acquire":
        if mine:
            return True, None
        if fence_token is not None and fence_token < token:
            return True, ("acquisition_lost_in_crash",
                          f"no writer or reader row has token {token}; the fence has {fence_token}")
        return False, None
    if not mine:
        return False, None
    if any(mine):
        return True, ("release_lost_in_crash", f"a row is still held with token {token}")
    return True, None


def lock_row_of(name):
    """The lock row of a logged name: the name itself, or the permit row of <semaphore>#<slot>."""
    sem, hash_, slot = name.rpartition("#")
    return permit_row_name(sem, int(slot)) if hash_ and slot.isdigit() else name


class Driver:
    def __init__(self, opts):
        self.o = opts
        self.permits = opts.permits  # >= 2: every name is a semaphore; lock workers take one permit
        self.tables = opts.tables if opts.tables > 1 and not opts.permits else 1  # lock tables on the server
        self.backend = opts.backend
        self.rng = random.Random(opts.seed)
        # Tables and names unique per run, also when a seed is replayed (a failed run keeps its tables).
        self.prefix = "f%06x" % self.rng.randrange(1 << 24) + "p%x" % os.getpid()
        self.out = opts.out
        os.makedirs(self.out, exist_ok=True)
        self.v = Violations()
        self.events = []  # dicts: kind, t, pid, holding, t_end
        self.restarts = []  # (t_start, t_end)
        self.faults = {k: 0 for k in ALL_KINDS}
        self.classes = set(ALL_KINDS) if opts.classes == "all" else \
            {c for c in opts.classes.split(",") if c and c != "none"}
        unknown = self.classes - set(ALL_KINDS)
        if unknown:
            raise SystemExit(f"fault_driver: unknown fault classes {sorted(unknown)} (known: {', '.join(ALL_KINDS)})")
        self.proxies = {}  # slot -> ProxyCtl (server backends: one proxy per lock-worker slot)
        self.inventory_kills = 0
        self.inventory_conn_kills = 0
        self.next_index = 1
        self.exited = []  # Proc objects that finished
        self.faketime_lib = next((p for p in FAKETIME_LIB_CANDIDATES if os.path.exists(p)), None)
        self.notes = []
        self.proxy_stats = []
        self.ttl_top = max(opts.ttl_ms, opts.ttl_max_ms)  # the longest outer TTL drawn
        u = urllib.parse.urlsplit(opts.url) if self.backend != "sqlite" else None
        self.server_port = u.port if u else None
        self.plain_url = opts.url
        self.pg_settings = set(opts.pg_setting.split(",")) - {"default"} if self.backend == "postgresql" else set()
        self.crash_checks = {"judged": 0, "taken_since": 0, "rw_judged": 0}
        self.refusal_checked = False
        if opts.accept_unsafe_durability:
            # Every worker (and setup, verify, dump) accepts a lazy server: the run shows what a crash
            # then does to acknowledged acquisitions (the checks are expected to fail).
            opts.url += ("&" if "?" in opts.url else "?") + "sqllock_allow_unsafe_durability=on"

    # ------------------------------------------------------------------ helpers

    def worker_cmd(self, mode, url=None, **kw):
        cmd = [self.o.worker, mode, "--url", url or self.o.url, "--prefix", self.prefix, "--names", str(self.o.names)]
        if self.permits:
            cmd += ["--permits", str(self.permits)]
        if self.tables > 1 and mode in ("setup", "verify", "dump", "cleanup"):
            cmd += ["--tables", str(self.tables)]
        for k, val in kw.items():
            cmd += ["--" + k.replace("_", "-"), str(val)]
        return cmd

    def run_worker(self, mode, check=True, **kw):
        r = subprocess.run(self.worker_cmd(mode, **kw), capture_output=True, text=True, timeout=600)
        if check and r.returncode != 0:
            raise RuntimeError(f"fault_worker {mode} failed ({r.returncode}): {r.stderr.strip()}")
        return r

    def spawn(self, slot, mode, skew=None, **kw):
        index = self.next_index
        self.next_index += 1
        log_path = os.path.join(self.out, f"{mode}_{index:05d}.log")
        env = dict(os.environ)
        if skew and self.faketime_lib:
            # What `faketime -f '+1h' cmd` does, without its fork, so that the pid we signal is the worker.
            env["LD_PRELOAD"] = self.faketime_lib
            env["FAKETIME"] = skew
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"  # skew the wall clock, as NTP trouble would
            env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
        stderr = open(os.path.join(self.out, f"{mode}_{index:05d}.stderr"), "w")
        url = None
        if mode == "lock" and slot in self.proxies:
            url = replace_url_host(self.o.url, "127.0.0.1", self.proxies[slot].port)
        # Each worker leads its own session and process group. In the driver's group, a worker that
        # the driver SIGSTOPped was continued by the kernel (SIGHUP + SIGCONT) whenever another member
        # exited and left the group orphaned, as under `nohup driver &`; the stop then ended early
        # (stop_continued_early, which the driver still watches for). The worker asks for SIGKILL when
        # the driver dies (fault_worker.cpp, PR_SET_PDEATHSIG), since a kill of the driver's group no
        # longer reaches it.
        p = subprocess.Popen(self.worker_cmd(mode, url=url, index=index, log=log_path, **kw), env=env,
                             stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        stderr.close()
        proc = Proc(slot, index, p, log_path, skew)
        proc.threads = int(kw.get("threads", 1))
        proc.proxy = self.proxies.get(slot) if mode == "lock" else None
        proc.holder_label = kw.get("holder")
        return proc

    def signal(self, proc, sig):
        try:
            os.kill(proc.pid, sig)
            return True
        except ProcessLookupError:
            return False

    def server_connections(self, pid):
        """Local TCP ports of `pid`'s connections to the database server."""
        inodes = set()
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            return []
        ports = []
        for table in ("tcp", "tcp6"):
            try:
                with open(f"/proc/{pid}/net/{table}") as f:
                    next(f)
                    for line in f:
                        cols = line.split()
                        local, remote, inode = cols[1], cols[2], cols[9]
                        if inode in inodes and int(remote.split(":")[1], 16) == self.server_port:
                            ports.append(int(local.split(":")[1], 16))
            except OSError:
                pass
        return ports

    def admin_sql(self, sql):
        if self.backend == "postgresql":
            cmd = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", self.o.admin_url, "-c", sql]
        else:
            u = urllib.parse.urlsplit(self.o.admin_url)
            cmd = ["mariadb", "--no-defaults", "-h", u.hostname, "-P", str(u.port or 3306),
                   "-u", urllib.parse.unquote(u.username or ""), "-p" + urllib.parse.unquote(u.password or ""),
                   "-N", "-B", "-e", sql]
            if u.path.strip("/"):
                cmd[-2:-2] = ["-D", urllib.parse.unquote(u.path.strip("/"))]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            self.notes.append(f"admin sql failed: {r.stderr.strip()[:200]}")
        return r.stdout

    def kill_connections(self, proc):
        # A worker behind its own proxy: the server sees the proxy's connections (one proxy per slot).
        pr = getattr(proc, "proxy", None)
        ports = self.server_connections(pr.pid if pr else proc.pid)
        if not ports:
            return 0
        plist = ",".join(str(p) for p in ports)
        if self.backend == "postgresql":
            out = self.admin_sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                 f"WHERE client_port IN ({plist}) AND pid <> pg_backend_pid()")
            try:
                return int(out.strip() or 0)
            except ValueError:
                return 0
        hosts = ",".join(f"'127.0.0.1:{p}'" for p in ports)
        ids = self.admin_sql(f"SELECT id FROM information_schema.processlist WHERE host IN ({hosts})").split()
        if ids:
            self.admin_sql("; ".join(f"KILL {i}" for i in ids))
        return len(ids)

    # ------------------------------------------------------------------ the lock phase

    def lock_phase(self, seconds):
        o = self.o
        skews = {}
        # (SQLite read each process's own clock until 1b4872d: see repro_clock_skew.sh.)
        skew = o.skew in ("on", "auto")
        if skew and self.faketime_lib and o.workers >= 3:
            skews = {1: "+1h", 2: "-1h"}
        elif skew and not self.faketime_lib:
            self.notes.append("libfaketime not found: no skewed workers")
        lock_kw = dict(ttl=o.ttl_ms, wait=o.wait_ms, slow_tx_pct=10)
        if o.guard_pct:
            lock_kw["guard_pct"] = o.guard_pct
        # Workload shapes: random outer TTLs, reentrant nesting, workers sharing a holder label.
        if o.ttl_max_ms > o.ttl_ms:
            lock_kw["ttl_max"] = o.ttl_max_ms
        if o.server_durability == "lazy" and self.backend == "postgresql":
            lock_kw["durable_writes"] = 1
        if o.cancel_pct and not self.permits:
            lock_kw["cancel_pct"] = o.cancel_pct
        if o.race_pct and not self.permits:
            lock_kw["race_pct"] = o.race_pct
        if o.multi_pct and not self.permits:
            lock_kw["multi_pct"] = o.multi_pct
        if o.leader_pct and not self.permits:
            lock_kw["leader_pct"] = o.leader_pct
        if o.rw_pct and not self.permits:
            lock_kw["rw_pct"] = o.rw_pct
        if o.fair_pct and not self.permits:
            lock_kw["fair_pct"] = o.fair_pct
        if o.break_:
            lock_kw["break"] = o.break_
        if o.nest_pct:
            lock_kw["nest_pct"] = o.nest_pct
            lock_kw["nest_ttl"] = o.nest_ttl
        shared = set(range(max(0, o.workers - o.shared_holder), o.workers)) if o.shared_holder >= 2 else set()
        self.shared_slots = shared

        def kw_of(slot):
            kw = dict(lock_kw, holder="shared-" + self.prefix) if slot in shared else dict(lock_kw)
            # 1 to 16 lock loops per client process (threads sharing one client): a fixed number, or
            # mix: one slot's process runs 2, 4, 8 or 16 threads (drawn again at each respawn), the
            # others one (more would only make every waiter time out on the few names).
            n = (self.rng.choice((2, 4, 8, 16)) if slot == o.workers // 2 else 1) \
                if o.threads_per_client == "mix" else int(o.threads_per_client)
            if n > 1:
                kw["threads"] = n
            # Several lock tables: slot s uses table s % --tables (its names logged <name>@<k>).
            if self.tables > 1 and slot % self.tables:
                kw["table_index"] = slot % self.tables
            return kw
        # Partitions and lost answers: one fault_proxy per lock-worker slot between it and the server.
        want_proxy = self.backend != "sqlite" and (o.proxy_mode == "on" or (
            o.proxy_mode == "auto" and self.classes & set(PROXY_KINDS)))
        if want_proxy:
            if not o.proxy or not os.access(o.proxy, os.X_OK):
                raise SystemExit(f"fault_driver: fault_proxy binary not found ({o.proxy!r}); pass --proxy PATH")
            u = urllib.parse.urlsplit(o.url)
            for s_ in range(o.workers):
                self.proxies[s_] = ProxyCtl(o.proxy, u.hostname, u.port, os.path.join(self.out, f"proxy_{s_}.stderr"))
        slots = {s: self.spawn(s, "lock", skews.get(s), **kw_of(s)) for s in range(o.workers)}
        self.lock_procs_all = list(slots.values())
        # Measures when the database took writes at all; never a fault target.
        self.probe = self.spawn(-1, "probe")
        self.skewed = len(skews)
        t0 = time.monotonic()
        end = t0 + seconds
        kinds = [("kill", 3), ("stop", 2), ("kill_mid_tx", 2 if self.backend == "sqlite" else 1)]
        if self.backend != "sqlite":
            kinds += [("conn_kill", 2), ("conn_kill_mid_tx", 2)]
        if self.proxies:
            kinds += [("partition", 2), ("lose_answer", 3), ("delay", 1), ("cut", 1)]
        kinds = [(k, w) for k, w in kinds if k in self.classes]
        restart_every = max(15.0, min(60.0, seconds / 3)) if (
            self.backend != "sqlite" and o.restart_cmd and "restart" in self.classes) else None
        next_restart = t0 + (restart_every or 0) * 0.8
        crash_kinds = [k for k in CRASH_KINDS if k in self.classes] if (
            self.backend != "sqlite" and o.crash_cmd) else []
        crash_every = (o.crash_interval or max(10.0, min(40.0, seconds / 4))) if crash_kinds else None
        next_crash = t0 + (crash_every or 0) * 0.6
        next_fault = t0 + 2.0
        pending_respawn = []  # (time, slot)
        stall_us = (self.ttl_top * 2 + o.wait_ms) * 1000 + 15_000_000
        while time.monotonic() < end:
            time.sleep(0.05)
            tnow = now_us()
            for p in list(slots.values()):
                p.poll_log()
                if p.stopped_until and proc_state(p.pid) not in ("T", "Z", "X", None):
                    # Running again before the driver continued it: something else sent SIGCONT (a
                    # test or tool on the same machine). The stop ended when it was last seen
                    # stopped; what the worker did after that is judged as running, not frozen.
                    p.stop_event["t_end"] = p.stop_seen
                    p.stop_event["continued_early"] = True
                    self.faults["stop_continued_early"] = self.faults.get("stop_continued_early", 0) + 1
                    p.stopped_until = None
                    p.last_progress = now_us()
                elif p.stopped_until:
                    p.stop_seen = now_us()
                if p.stopped_until and time.monotonic() >= p.stopped_until:
                    self.signal(p, signal.SIGCONT)
                    ev = p.stop_event
                    ev["t_end"] = now_us()
                    p.stopped_until = None
                    p.last_progress = now_us()
                rc = p.popen.poll()
                if rc is not None:
                    p.exit_code = rc
                    self.exited.append(p)
                    del slots[p.slot]
                    if not p.killed_by_us:
                        self.v.add("worker_crashed", f"lock worker {p.index} pid {p.pid} exited with {rc} "
                                                     f"(see {p.log_path[:-4]}.stderr)")
                    pending_respawn.append((time.monotonic() + self.rng.uniform(0.1, 1.0), p.slot, p.skew))
                    continue
                recent_restart = any(r[1] is None or r[1] > tnow - stall_us for r in self.restarts)
                if (not p.stopped_until and not p.stall_reported and not recent_restart
                        and tnow - p.last_progress > stall_us):
                    p.stall_reported = True
                    self.v.add("process_stuck", f"lock worker {p.index} pid {p.pid} wrote nothing for "
                                                f"{(tnow - p.last_progress) / 1e6:.1f}s (state {p.state})")
            self.end_proxy_faults(slots)
            for item in list(pending_respawn):
                if time.monotonic() >= item[0]:
                    pending_respawn.remove(item)
                    np = self.spawn(item[1], "lock", item[2], **kw_of(item[1]))
                    slots[item[1]] = np
                    self.lock_procs_all.append(np)
            if restart_every and time.monotonic() >= next_restart and time.monotonic() < end - 10:
                next_restart = time.monotonic() + restart_every
                self.restart_server()
                continue
            if crash_every and time.monotonic() >= next_crash and time.monotonic() < end - 10:
                self.crash_server(self.rng.choice(crash_kinds), slots)
                next_crash = time.monotonic() + crash_every * self.rng.uniform(0.7, 1.3)
                continue
            if time.monotonic() < next_fault:
                continue
            next_fault = time.monotonic() + self.rng.uniform(0.6, 1.6) * o.fault_interval
            if not kinds:
                continue
            kind = self.rng.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
            if kind in PROXY_KINDS:
                self.inject_proxy(kind, slots)
            else:
                self.inject(kind, slots)
        # End of phase: heal the network, resume stopped workers, ask everyone to finish, then wait.
        self.end_proxy_faults(slots, all_now=True)
        for p in slots.values():
            if p.stopped_until:
                self.signal(p, signal.SIGCONT)
                p.stop_event["t_end"] = now_us()
                p.stopped_until = None
        for p in list(slots.values()) + [self.probe]:
            self.signal(p, signal.SIGTERM)
        deadline = time.monotonic() + (self.ttl_top * 3 + o.wait_ms) / 1000 + 20
        for p in slots.values():
            try:
                p.exit_code = p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.v.add("process_stuck", f"lock worker {p.index} did not finish within "
                                            f"{(self.ttl_top * 3 + o.wait_ms) / 1000 + 20:.0f}s of SIGTERM")
                p.killed_by_us = True
                self.signal(p, signal.SIGKILL)
                p.popen.wait()
            never_started = not os.path.exists(p.log_path) or os.path.getsize(p.log_path) == 0
            if p.exit_code == -signal.SIGTERM and never_started:
                # A respawn that our SIGTERM reached before its handler was installed (it had not
                # written its first line yet): not a crash.
                self.notes.append(f"lock worker {p.index} ended by the end-of-phase SIGTERM before it started")
            elif p.exit_code not in (0, None, -9) and not p.killed_by_us:
                self.v.add("worker_crashed", f"lock worker {p.index} exited with {p.exit_code}")
            p.poll_log()
        try:
            self.probe.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.probe.popen.kill()
            self.probe.popen.wait()
        for pr in self.proxies.values():
            try:
                self.proxy_stats.append(pr.cmd("stats"))
            except (OSError, RuntimeError):
                pass
            pr.close()

    def db_stalls(self):
        """Intervals (t0, t1) longer than 500 ms in which the probe's writes all failed or hung,
        including one that lasts from the probe's first write or up to its last (an outage the
        database never came back from before the end, e.g. PgBouncer refusing logins for
        server_login_retry after a crash, is a stall too, not a gap between two successes)."""
        probes = [c for c in self.read_log(self.probe.log_path) if c[0] == "H"]
        oks = sorted(int(c[2]) for c in probes if c[3] == "ok")
        if probes:
            first = min(int(c[1]) for c in probes)
            last = max(int(c[2]) for c in probes)
            oks = [first] + oks + [last] if oks else [first, last]
        return [(a, b) for a, b in zip(oks, oks[1:]) if b - a > 500_000]

    def db_stalled(self, t0, t1):
        """True when the database took no writes for over 500 ms somewhere in [t0, t1]."""
        hit = any(a < t1 and b > t0 for a, b in self.stalls)
        if hit:
            self.excused_by_stall += 1
        return hit

    def pick(self, slots, states):
        cands = [p for p in slots.values()
                 if not p.stopped_until and not p.killed_by_us and p.state in states and p.holding]
        return self.rng.choice(cands) if cands else None

    def inject(self, kind, slots):
        if kind in ("kill_mid_tx", "conn_kill_mid_tx"):
            # Wait a little for a worker inside its write transaction.
            limit = time.monotonic() + 2.0
            p = None
            while time.monotonic() < limit:
                for q in slots.values():
                    q.poll_log()
                p = self.pick(slots, ("X",))
                if p:
                    break
                time.sleep(0.005)
            if not p:
                return
            holding = p.holding
            if kind == "conn_kill_mid_tx":
                t = now_us()
                n = self.kill_connections(p)
                if n:
                    self.faults["conn_kill_mid_tx"] += 1
                    self.events.append(dict(kind="conn_kill", sub="mid_tx", t=t, pid=p.pid, holding=holding, n=n))
                return
            p.killed_by_us = True
            if self.signal(p, signal.SIGKILL):
                self.faults["kill_mid_tx"] += 1
                self.events.append(dict(kind="kill", sub="mid_tx", t=now_us(), pid=p.pid, holding=holding))
            return
        p = self.pick(slots, ("A",))
        if not p:
            return
        holding = p.holding
        if kind == "kill":
            p.killed_by_us = True
            if self.signal(p, signal.SIGKILL):
                self.faults["kill"] += 1
                self.events.append(dict(kind="kill", sub="holder", t=now_us(), pid=p.pid, holding=holding))
        elif kind == "stop":
            if sum(1 for q in slots.values() if q.stopped_until) >= 2:
                return
            dur = self.ttl_top / 1000 * self.rng.uniform(1.5, 2.5)
            if self.signal(p, signal.SIGSTOP):
                self.faults["stop"] += 1
                t = now_us()
                # The stop is in force once the process shows it (state T); it is then watched, so
                # that a SIGCONT from elsewhere ends the stop where it really ended (see run()).
                until = time.monotonic() + 1.0
                while proc_state(p.pid) not in ("T", "Z", "X", None) and time.monotonic() < until:
                    time.sleep(0.001)
                p.stop_seen = now_us()
                ev = dict(kind="stop", t=t, pid=p.pid, holding=holding, t_end=None)
                self.events.append(ev)
                p.stop_event = ev
                p.stopped_until = time.monotonic() + dur
        elif kind == "conn_kill":
            t = now_us()
            n = self.kill_connections(p)
            if n:
                self.faults["conn_kill"] += 1
                self.events.append(dict(kind="conn_kill", t=t, pid=p.pid, holding=holding, n=n))

    # ------------------------------------------------------------------ faults through the proxies

    def inject_proxy(self, kind, slots):
        """A network fault between one lock worker (a holder, when there is one) and the server."""
        cands = [p for p in slots.values() if p.proxy and not p.proxy.fault and not p.stopped_until
                 and not p.killed_by_us and p.holding and p.state in ("A", "X", "W", "U")]
        if not cands:
            return
        p = self.rng.choice(cands)
        ttl_s = max(self.o.ttl_ms, self.o.ttl_max_ms) / 1000
        ev = dict(kind=kind, t=now_us(), pid=p.pid, holding=p.holding, t_end=None)
        if kind == "partition":
            if sum(1 for q in self.proxies.values() if q.fault and q.fault["kind"] == "partition") >= 2:
                return
            # Silent drop both ways (no RST) for longer than the TTL; then heal, and reset the
            # connections left half-open (what keepalive would do).
            p.proxy.cmd("blackhole")
            p.proxy.fault = dict(kind=kind, until=time.monotonic() + ttl_s * self.rng.uniform(1.3, 2.2), ev=ev)
        elif kind == "lose_answer":
            # The next statement(s) of this worker run on the server; their answers never arrive
            # (the connection then stays silent, or is reset: lose-answer-reset).
            how = "lose-answer-reset" if self.rng.random() < 0.3 else "lose-answer"
            ev.update(sub=how, n=self.rng.choice((1, 1, 2)))
            p.proxy.cmd(how)
            p.proxy.fault = dict(kind=kind, until=time.monotonic() + ttl_s, ev=ev, how=how, rearm=ev["n"] - 1,
                                 lost=int(re.search(r"answers_lost=(\d+)", p.proxy.cmd("stats")).group(1)))
        elif kind == "delay":
            ev["ms"] = self.rng.randint(50, 400)
            p.proxy.cmd(f"delay {ev['ms']}")
            p.proxy.fault = dict(kind=kind, until=time.monotonic() + self.rng.uniform(1.0, 3.0), ev=ev)
        elif kind == "cut":
            p.proxy.cmd("cut")
            ev["t_end"] = now_us()
        self.faults[kind] += 1
        self.events.append(ev)

    def proxy_totals(self):
        """Sums of the proxies' final `stats` answers (what the network faults really did)."""
        tot = {}
        for line in self.proxy_stats:
            for k, v in re.findall(r"(\w+)=(\d+)", line):
                if k != "open":
                    tot[k] = tot.get(k, 0) + int(v)
        return ",".join(f"{k}={v}" for k, v in tot.items()) or "none"

    def end_proxy_faults(self, slots, all_now=False):
        """Heals the proxy faults whose time is up (all of them with all_now)."""
        now = time.monotonic()
        for pr in self.proxies.values():
            f = pr.fault
            if not f:
                continue
            if f["kind"] == "lose_answer" and f["rearm"] > 0 and not all_now:
                lost = int(re.search(r"answers_lost=(\d+)", pr.cmd("stats")).group(1))
                if lost > f["lost"]:  # the armed answer was dropped: drop the next statement's too
                    f["lost"] = lost
                    f["rearm"] -= 1
                    pr.cmd(f["how"])
            if all_now or now >= f["until"]:
                pr.cmd("pass")
                pr.cmd("cut-silenced")
                f["ev"]["t_end"] = now_us()
                pr.fault = None

    def restart_server(self):
        t = now_us()
        self.restarts.append([t, None])
        r = subprocess.run(self.o.restart_cmd, shell=True, capture_output=True, text=True, timeout=180)
        self.restarts[-1][1] = now_us()
        if r.returncode != 0:
            self.v.add("restart_failed", r.stderr.strip()[-300:])
        else:
            self.faults["restart"] += 1
        self.events.append(dict(kind="restart", t=t, t_end=self.restarts[-1][1]))

    def crash_server(self, kind, slots):
        """kill -9 of the server and a start with crash recovery (--crash-cmd). crash_after_ack waits
        (up to 3 s) for a worker's next acknowledged acquire or release and crashes right after it,
        then checks the lock row: an acknowledged acquisition is still there (the row's token is at
        least its token), an acknowledged release is still applied (the row is not held with its
        token). Every check of the run also covers what follows (tokens never handed out twice)."""
        ack = None
        if kind == "crash_after_ack":
            before = {p.slot: p.acks for p in slots.values()}
            limit = time.monotonic() + 3.0
            while time.monotonic() < limit and not ack:
                for p in slots.values():
                    p.poll_log()
                    if p.acks > before.get(p.slot, 0) and p.last_ack:
                        ack = p.last_ack
                        break
                if not ack:
                    time.sleep(0.002)
            if not ack:
                return
        # crash_after_ack freezes the workers from just before the crash until the lock row was read,
        # so that nobody acquires the name in between and the row can be judged (the plain `crash`
        # class leaves them running, reconnecting while the server recovers). The window counts as
        # a restart: what a frozen holder does late is excused, as for every restart.
        frozen = [p for p in slots.values() if not p.stopped_until and self.signal(p, signal.SIGSTOP)] if ack else []
        t = now_us()
        self.restarts.append([t, None])
        try:
            r = subprocess.run(self.o.crash_cmd, shell=True, capture_output=True, text=True, timeout=180)
            if r.returncode != 0:
                self.v.add("crash_restart_failed", r.stderr.strip()[-300:])
                return
            self.faults[kind] += 1
            ev = dict(kind="crash", sub=kind, t=t, t_end=None)
            self.apply_durability(after_crash=True)
            if ack:
                self.check_after_crash(ack, t, ev)
        finally:
            for p in frozen:
                self.signal(p, signal.SIGCONT)
            self.restarts[-1][1] = now_us()
        ev["t_end"] = self.restarts[-1][1]
        self.events.append(ev)

    def check_after_crash(self, ack, t, ev):
        """The lock row of the operation acknowledged just before the crash, read after recovery."""
        op, name, token, t_ack = ack
        ev.update(op=op, name=name, token=token, ms_after_ack=(t - t_ack) / 1000)
        plain, at, k = name.rpartition("@")
        table = f"{self.prefix}_lt{k}" if at else "sqllock_locks"  # --tables: <name>@<k> lives in table k
        if RW_NAME.search(name):
            self.check_rw_after_crash(op, name, plain if at else name, table, token, t, t_ack, ev)
            return
        row = self.admin_sql(f"SELECT token, CASE WHEN holder_id IS NULL THEN 0 ELSE 1 END FROM {table} "
                             f"WHERE name = '{lock_row_of(plain if at else name)}'").replace("|", " ").split()
        if len(row) != 2:
            self.v.add("crash_check_failed", f"no lock row for {name} after the crash ({row})")
            return
        row_token, held = int(row[0]), row[1] == "1"
        ev.update(row_token=row_token, row_held=held)
        # Judged only while nobody acquired the name since (a later token says nothing of it).
        self.crash_checks["judged" if row_token <= token else "taken_since"] += 1
        if op == "acquire" and row_token < token:
            self.v.add("acquisition_lost_in_crash",
                       f"{name}: token {token} acknowledged {(t - t_ack) / 1000:.1f} ms before the crash; "
                       f"after recovery the row has token {row_token}")
        if op == "release" and held and row_token == token:
            self.v.add("release_lost_in_crash",
                       f"{name}: release of token {token} acknowledged {(t - t_ack) / 1000:.1f} ms before "
                       f"the crash; after recovery the row is still held with that token")

    def check_rw_after_crash(self, op, name, lease, table, token, t, t_ack, ev):
        """check_after_crash for a reader-writer lease: its writer, reader and fence rows, in one
        range read (judge_rw_rows)."""
        lo, hi = rw_rows_range(lease)
        out = self.admin_sql(f"SELECT name, token, CASE WHEN holder_id IS NULL THEN 0 ELSE 1 END FROM {table} "
                             f"WHERE name >= '{lo}' AND name < '{hi}'")
        rows = {}
        for line in out.splitlines():
            cols = line.replace("|", "\t").split("\t")
            if len(cols) == 3 and cols[1].strip().lstrip("-").isdigit():
                rows[cols[0].strip()] = (int(cols[1]), cols[2].strip() == "1")
        fence = rw_fence_row(lease)
        if fence not in rows:
            self.v.add("crash_check_failed", f"no fence row for {name} after the crash ({len(rows)} rows)")
            return
        judged, violation = judge_rw_rows(op, token, rows, fence)
        ev.update(row_token=rows[fence][0], rw_rows=len(rows))
        self.crash_checks["judged" if judged else "taken_since"] += 1
        self.crash_checks["rw_judged"] += 1 if judged else 0
        if violation:
            kind, what = violation
            self.v.add(kind, f"{name} ({op} of token {token} acknowledged {(t - t_ack) / 1000:.1f} ms before "
                             f"the crash): after recovery {what}")

    def apply_durability(self, after_crash=False):
        """--server-durability lazy: the server's default commit durability made lazy (PostgreSQL
        synchronous_commit = off, persisted with ALTER SYSTEM; MariaDB innodb_flush_log_at_trx_commit =
        --mysql-flush, a global that a restart resets, so it is set again after every crash)."""
        if self.o.server_durability != "lazy":
            return
        if self.backend == "postgresql" and not after_crash:
            self.admin_sql("ALTER SYSTEM SET synchronous_commit = off")
            self.admin_sql("SELECT pg_reload_conf()")
        elif self.backend == "mysql" and (self.o.accept_unsafe_durability or not after_crash):
            self.admin_sql(f"SET GLOBAL innodb_flush_log_at_trx_commit = {self.o.mysql_flush}")

    def apply_pg_settings(self):
        """--pg-setting serializable: the server's default_transaction_isolation made serializable
        for the run (ALTER SYSTEM, reloaded; every new session of sqllock and of the workers then runs
        serializable). Confirmed from a fresh session; reset at the end of the run."""
        if "serializable" not in self.pg_settings:
            return
        self.admin_sql("ALTER SYSTEM SET default_transaction_isolation = 'serializable'")
        self.admin_sql("SELECT pg_reload_conf()")
        time.sleep(0.5)
        got = self.admin_sql("SHOW default_transaction_isolation").strip()
        if got != "serializable":
            raise SystemExit(f"fault_driver: default_transaction_isolation is {got!r} after ALTER SYSTEM")

    def reset_pg_settings(self):
        if "serializable" in self.pg_settings:
            self.admin_sql("ALTER SYSTEM RESET default_transaction_isolation")
            self.admin_sql("SELECT pg_reload_conf()")

    def reset_durability(self):
        if self.o.server_durability != "lazy":
            return
        if self.backend == "postgresql":
            self.admin_sql("ALTER SYSTEM RESET synchronous_commit")
            self.admin_sql("SELECT pg_reload_conf()")
        elif self.backend == "mysql":
            self.admin_sql("SET GLOBAL innodb_flush_log_at_trx_commit = 1")

    def check_refusal(self):
        """Where sqllock refuses a lazy server (MariaDB flush != 1), it must refuse: a client that did
        not accept the risk gets invalid_argument naming the setting."""
        r = subprocess.run([self.o.worker, "connect", "--url", self.plain_url], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 3 or "innodb_flush_log_at_trx_commit" not in r.stderr:
            self.v.add("lazy_durability_accepted",
                       f"flush={self.o.mysql_flush}: connect exited {r.returncode}: {r.stderr.strip()[:200]}")
        else:
            self.notes.append(f"refused as it must: {r.stderr.strip()[:160]}")
        self.refusal_checked = True

    # ------------------------------------------------------------------ the inventory phase

    def inventory_phase(self, strategy, seconds):
        o = self.o
        procs = {s: self.spawn(s, "inventory", None, strategy=strategy) for s in range(o.inventory_procs)}
        allp = list(procs.values())
        t0 = time.monotonic()
        end = t0 + seconds
        next_kill = t0 + self.rng.uniform(0.2, 0.6)
        next_conn_kill = t0 + 1.0
        depleted = False
        while time.monotonic() < end and procs:
            time.sleep(0.02)
            for p in list(procs.values()):
                rc = p.popen.poll()
                if rc is None:
                    continue
                p.exit_code = rc
                del procs[p.slot]
                if not p.killed_by_us and rc != 0:
                    self.v.add("worker_crashed", f"inventory worker {p.index} ({strategy}) exited with {rc}")
                if p.killed_by_us:
                    np = self.spawn(p.slot, "inventory", None, strategy=strategy)
                    procs[p.slot] = np
                    allp.append(np)
                elif rc == 0:
                    depleted = True  # it saw the stock at 0 and stopped
            if self.backend != "sqlite" and procs and time.monotonic() >= next_conn_kill and not depleted:
                # A sale's connection ended under it: its commit must fail or be durable.
                next_conn_kill = time.monotonic() + self.rng.uniform(1.0, 3.0) * o.fault_interval
                if self.kill_connections(self.rng.choice(list(procs.values()))):
                    self.inventory_conn_kills += 1
            if procs and time.monotonic() >= next_kill and not depleted:
                next_kill = time.monotonic() + self.rng.uniform(0.1, 0.5) * o.fault_interval
                victim = self.rng.choice(list(procs.values()))
                victim.killed_by_us = True
                if self.signal(victim, signal.SIGKILL):
                    self.inventory_kills += 1
        for p in procs.values():
            self.signal(p, signal.SIGTERM)
        for p in procs.values():
            try:
                p.exit_code = p.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.v.add("process_stuck", f"inventory worker {p.index} ({strategy}) ignored SIGTERM for 60 s")
                self.signal(p, signal.SIGKILL)
                p.popen.wait()
        return allp, time.monotonic() - t0

    # ------------------------------------------------------------------ reading logs and the database

    @staticmethod
    def read_log(path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        lines = data.split("\n")
        if lines and lines[-1] != "":
            lines.pop()  # a torn last line (killed while writing it): ignore
        return [line.split("\t") for line in lines if line]

    def dump(self):
        r = self.run_worker("dump")
        d = dict(res={}, aw=[], lock={}, stock={}, sales={}, integrity=[])
        for line in r.stdout.split("\n"):
            c = line.split("\t")
            if c[0] == "RES":
                d["res"][c[1]] = (int(c[2]), int(c[3]), c[4])
            elif c[0] == "AW":
                d["aw"].append((int(c[1]), c[2], int(c[3]), c[4], int(c[5])))
            elif c[0] == "LOCK":
                d["lock"][c[1]] = (int(c[2]), c[3])
            elif c[0] == "STOCK":
                d["stock"][c[1]] = int(c[2])
            elif c[0] == "SALE":
                d["sales"].setdefault(c[1], set()).add((int(c[2]), int(c[3])))
            elif c[0] == "INTEGRITY":
                d["integrity"].append(c[1])
        return d

    def check_lock_phase(self, db, verify_lines):
        o = self.o
        self.stalls = self.db_stalls()
        self.excused_by_stall = 0
        slack_us = 2_000_000
        acqs = []
        timeouts = {}
        errors = {}
        for p in views_of(self.lock_procs_all):
            cur = None
            for c in self.read_log(p.log_path):
                t = c[0]
                if t == "A":
                    cur = dict(name=c[1], token=int(c[2]), holder=c[3], t_req=int(c[4]), t_ack=int(c[5]),
                               pid=p.pid, skew=p.skew, w=None, u=None, r=None)
                    acqs.append(cur)
                elif t == "N":
                    timeouts.setdefault(c[1], []).append(dict(t_req=int(c[2]), t_end=int(c[3]), pid=p.pid))
                    dur = int(c[3]) - int(c[2])
                    if dur > o.wait_ms * 1000 + slack_us and not self.excused(p.pid, int(c[2]), int(c[3])):
                        self.v.add("process_stuck", f"pid {p.pid}: try_acquire_for({c[1]}, {o.wait_ms}ms) "
                                                    f"returned after {dur / 1000:.0f} ms")
                elif t == "W" and cur:
                    cur["w"] = dict(t_ws=int(c[4]), t_we=int(c[5]), applied=c[6], lost_before=c[7] == "1",
                                    val=int(c[8]))
                elif t == "U" and cur:
                    cur["u"] = dict(t_u0=int(c[3]), t_u1=int(c[4]), result=c[5], lost=c[6] == "1")
                elif t == "R" and cur:
                    cur["r"] = dict(t_rr=int(c[3]), t_re=int(c[4]), result=c[5], lost=c[6] == "1")
                elif t == "E":
                    errors[c[2]] = errors.get(c[2], 0) + 1
                    # Under a serializable server default, sqllock retries 40001 itself: its lease
                    # operations never surface it (the workers' own write transactions may).
                    if c[2] == "serialization_failure" and c[1] in (
                            "acquire", "inner_acquire", "renew", "release", "inner_release"):
                        self.v.add("serialization_failure_surfaced",
                                   f"pid {p.pid}: {c[1]} failed with serialization_failure: {c[4][:200]}")
                elif t == "C":
                    errors["client_recreated"] = errors.get("client_recreated", 0) + 1
        self.errors = errors
        if not hasattr(self, "per_proc"):
            self.per_proc = self.read_history()
        # A leader_latch term (worker --leader-pct) is logged from the latch's start: the latch
        # campaigns for as long as it is open (up to 2 TTL), with no wait bound to exceed.
        latch_terms = {(r["pid"], r["name"], r["token"]) for _, recs in self.per_proc for r in recs
                       if r["op"] == "acquire" and r["phase"] == "ok" and r["detail"] == "latch"}
        for a in acqs:
            if (a["pid"], a["name"], a["token"]) in latch_terms:
                continue
            d = a["t_ack"] - a["t_req"]
            if d > o.wait_ms * 1000 + slack_us and not self.excused(a["pid"], a["t_req"], a["t_ack"]):
                self.v.add("process_stuck", f"pid {a['pid']}: acquire of {a['name']} took {d / 1000:.0f} ms "
                                            f"(wait bound {o.wait_ms} ms)")
        by_name = {}
        for a in acqs:
            by_name.setdefault(a["name"], []).append(a)
        # With --permits, a dead holder's permit frees a place in its semaphore, whichever slot the
        # next holder gets: the checks after a kill look at every slot of the semaphore (waiters log
        # timeouts under the semaphore's name). Without, the same as by_name.
        by_sem = {}
        for a in acqs:
            by_sem.setdefault(base_name(a["name"]), []).append(a)

        for name, lst in by_name.items():
            # Tokens are unique per name.
            seen = {}
            for a in lst:
                if a["token"] in seen:
                    same = seen[a["token"]]["holder"] == a["holder"]
                    self.v.add("duplicate_token", f"{name} token {a['token']} acknowledged to "
                                                  f"{seen[a['token']]['holder']} and {a['holder']}" +
                               (" (the same holder after a release: see repro_release_lost)" if same else ""))
                seen[a["token"]] = a
            # Acquisition order: X acknowledged before Y even asked => X.token < Y.token.
            lst.sort(key=lambda a: a["t_ack"])
            acks = [a["t_ack"] for a in lst]
            prefix_max = []
            m = None
            for a in lst:
                m = a if m is None or a["token"] > m["token"] else m
                prefix_max.append(m)
            for y in lst:
                i = bisect.bisect_left(acks, y["t_req"]) - 1
                if i >= 0 and prefix_max[i]["token"] >= y["token"] and prefix_max[i] is not y:
                    x = prefix_max[i]
                    self.v.add("token_order", f"{name}: token {x['token']} ({x['holder']}) acknowledged before "
                                              f"{y['holder']} asked, which then got token {y['token']}")
            # A renew or release that passed the owner check although another process acquired in between.
            for x in lst:
                for op, key, t_key in (("renew", "u", "t_u0"), ("release", "r", "t_rr")):
                    if not x[key] or x[key]["result"] != "ok":
                        continue
                    for y in lst:
                        if y is not x and y["holder"] != x["holder"] and x["t_ack"] < y["t_req"] and \
                                y["t_ack"] < x[key][t_key]:
                            self.v.add(f"{op}_after_takeover",
                                       f"{name}: {x['holder']} token {x['token']} {op} passed the owner check at "
                                       f"{x[key][t_key]} after {y['holder']} acquired token {y['token']} at "
                                       f"{y['t_ack']}")
                            break
        # The database side: applied writes in commit order, the resource rows, the lock rows.
        ack_index = {(a["name"], a["token"], a["holder"]): a for a in acqs}
        aw_by_res = {}
        for seq, res, token, holder, val in db["aw"]:
            aw_by_res.setdefault(res, []).append((seq, token, holder, val))
            if (res, token, holder) not in ack_index:
                self.v.add("write_without_acquisition", f"{res}: applied write with token {token} by {holder} "
                                                        "matches no acknowledged acquisition")
        for res, rows in aw_by_res.items():
            for prev, nxt in zip(rows, rows[1:]):
                if nxt[1] <= prev[1]:
                    self.v.add("applied_out_of_order", f"{res}: write token {nxt[1]} ({nxt[2]}) applied after "
                                                       f"token {prev[1]} ({prev[2]})")
        for res, (val, token, writer) in db["res"].items():
            rows = aw_by_res.get(res, [])
            want = (rows[-1][3], rows[-1][1]) if rows else (0, 0)
            if (val, token) != want:
                self.v.add("resource_lost_write", f"{res}: resource holds val {val} token {token}, the last "
                                                  f"applied write was val {want[0]} token {want[1]}")
        aw_set = {(res, token, holder, val) for _, res, token, holder, val in db["aw"]}
        applied = 0
        for a in acqs:
            w = a["w"]
            if not w:
                continue
            key = (a["name"], a["token"], a["holder"], w["val"])
            if w["applied"] == "1":
                applied += 1
                if key not in aw_set:
                    self.v.add("applied_write_missing", f"{a['name']} token {a['token']}: acknowledged as "
                                                        "applied, not in the applied-writes log")
            elif w["applied"] == "0" and key in aw_set:
                self.v.add("rejected_write_present", f"{a['name']} token {a['token']}: reported rejected, "
                                                     "yet in the applied-writes log")
        for name, lst in by_name.items():
            if RW_NAME.search(name):
                continue  # a write lease's row is derived (sqllock.rwlock.<len>.<name>.writer): not dumped
            top = max(a["token"] for a in lst)
            row = db["lock"].get(name)
            if not row or row[0] < top:
                self.v.add("acquisition_without_row_trace", f"{name}: acknowledged token {top}, lock row has "
                                                            f"{row[0] if row else 'nothing'}")
        for c in verify_lines:
            name, token, status = c[1], int(c[2]), c[3]
            if status != "ok":
                diag = "; ".join([d[1] for d in getattr(self, "verify_diag", []) if d[0] == name][:12])
                self.v.add("stuck_lock", f"{name}: a fresh process could not acquire it after the run ({status})"
                                         + (f"; seen then: {diag}" if diag else ""))
            elif name in by_name and token <= max(a["token"] for a in by_name[name]):
                self.v.add("token_order", f"{name}: acquisition after the run got token {token}, not above "
                                          f"every earlier one")
        # Faults: takeover delay after a holder died; what a stopped holder saw.
        self.max_takeover_ms = 0.0
        self.takeovers = 0
        self.takeover_delays = []
        self.stop_outcomes = dict(taken_over=0, write_rejected=0, renew_refused=0, release_refused=0, unanswered=0,
                                  guard_lost=0, released_first=0, fair_taken_over=0, rw_taken_over=0)
        phase_end = max((a["t_ack"] for a in acqs), default=0)
        if not hasattr(self, "per_proc"):
            self.per_proc = self.read_history()
        self.other_holds = {}  # base name -> [(from, to)]: an unacknowledged holder may have got it in between
        invoked = {}
        tried = {}  # name -> times an acquire of it was invoked
        for _, recs in self.per_proc:
            for r in recs:
                if r["op"] != "acquire":
                    continue
                if r["phase"] == "invoke":
                    invoked[(r["who"], r["index"], r["name"])] = r["t"]
                    tried.setdefault(r["name"], []).append(r["t"])
                elif r["phase"] == "ok" and r["detail"] == "multi_partial":
                    self.other_holds.setdefault(base_name(r["name"]), []).append((r["t"], r["t"]))
                elif r["phase"] == "unknown":
                    self.other_holds.setdefault(base_name(r["name"]), []).append(
                        (invoked.get((r["who"], r["index"], r["name"]), r["t"]), r["t"]))
        for ev in self.events:
            if ev["kind"] == "kill" and ev.get("holding"):
                # The killed holder's lease ends at most one TTL after the kill (its last renewal was
                # before it). From then on the name is free: a waiter that times out before anyone
                # acquired it is stuck, and the first waiter should get it within a poll interval.
                name, token = ev["holding"]
                if any(a["token"] > token and a["t_ack"] < ev["t"] for a in by_name.get(name, [])):
                    # Taken over before it died (a stopped or partitioned holder, killed later in the
                    # same iteration): the name's fate after the kill is the later holder's.
                    continue
                free_by = self.lease_free_by(ev["pid"], ev["t"])
                ttl = (free_by - ev["t"]) // 1000
                nxt = [a for a in by_sem.get(base_name(name), []) if a["t_ack"] > ev["t"]]
                first = min(nxt, key=lambda a: a["t_ack"]) if nxt else None
                # A waiter's timeout proves the name stuck only before anybody could have held it
                # again: the next acknowledged acquisition (A line), a multi-lock's partial hold
                # (taken, then given back when the rest of its set timed out; logged by the worker
                # from its lease events) or the invoke of an acquisition whose answer was lost
                # (unknown: it may have been granted from its invoke on). From the O history.
                limit = first["t_ack"] if first else float("inf")
                for t_from, t_to in self.other_holds.get(base_name(name), []):
                    if t_to > ev["t"]:
                        limit = min(limit, max(t_from, ev["t"]))
                fair = bool(FAIR_NAME.search(name))
                for n in timeouts.get(base_name(name), []):
                    # A fair name goes to the lowest live ticket: a waiter whose process a fault hit
                    # (stopped, killed, cut off) may hold the queue up until its ticket expires.
                    queue_by = self.fair_queue_held_until(n["pid"], n["t_end"]) if fair else 0
                    if max(free_by, queue_by) + 750_000 < n["t_end"] < limit and n["t_req"] < n["t_end"] - 500_000 and \
                            not self.excused(n["pid"], free_by, n["t_end"]) and \
                            not self.db_stalled(free_by, n["t_end"]):
                        self.v.add("stuck_after_holder_died",
                                   f"{name}: a waiter timed out {(n['t_end'] - free_by) / 1000:.0f} ms after the "
                                   f"killed holder's lease (token {token}) had certainly expired, nobody "
                                   "acquired it in between")
                        break
                if first and first["t_req"] <= free_by:
                    delay = (first["t_ack"] - ev["t"]) / 1000
                    self.takeovers += 1
                    self.takeover_delays.append((delay, name, token, ev["t"]))
                    self.max_takeover_ms = max(self.max_takeover_ms, delay)
                    # (A fair name's queue may wait for a dead waiter's ticket to expire first.)
                    allowed = ttl + o.wait_ms + 2000 + (FAIR_TICKET_TTL_US // 1000 if fair else 0)
                    if delay > allowed and not self.restart_between(ev["t"], first["t_ack"]) \
                            and not self.db_stalled(ev["t"], first["t_ack"]):
                        self.v.add("slow_takeover", f"{name}: next acquisition {delay:.0f} ms after its holder "
                                                    f"(token {token}) was killed (TTL {ttl} ms)")
                elif not first and phase_end - ev["t"] > (ttl + o.wait_ms + 5000) * 1000 and not RW_NAME.search(name) \
                        and any(t >= free_by for t in tried.get(name, [])):
                    # (A reader-writer name: only its writers log A lines; readers may hold it
                    # all along and no writer need come. Only when somebody tried it once it was
                    # free: the workers pick names at random, and with two tables a fair name may
                    # go untried for the rest of the phase, as CI's MariaDB run at 1704531 saw:
                    # no acquire of the name in the 13.8 s after the kill, and the fresh process
                    # after the run acquired it.)
                    self.v.add("stuck_lock", f"{name}: nobody acquired it after holder token {token} was killed")
            if ev["kind"] == "stop" and ev.get("holding") and ev.get("t_end"):
                name, token = ev["holding"]
                x = next((a for a in by_name.get(name, []) if a["token"] == token and a["pid"] == ev["pid"]), None)
                if not x:
                    continue
                taken = [a for a in by_name.get(name, []) if a["token"] > token and a["t_ack"] < ev["t_end"]]
                if not taken:
                    continue
                if x["r"] and x["r"]["t_rr"] <= ev["t"]:
                    # Stopped with its release already sent: the release may have been applied before
                    # the stop (then the next acquisition is no takeover, and the release's "ok" is
                    # right) or not (then its owner check must fail); this history cannot tell which,
                    # so the stop is counted (stops_after_release) and not judged. Seen: a release
                    # invoked 3 ms before the SIGSTOP, applied, answered ok 7 s later after the resume.
                    self.stop_outcomes["released_first"] += 1
                    continue
                self.stop_outcomes["taken_over"] += 1
                if FAIR_NAME.search(name):
                    self.stop_outcomes["fair_taken_over"] += 1
                elif RW_NAME.search(name):
                    self.stop_outcomes["rw_taken_over"] += 1
                # A renew or release whose answer was lost (connection_lost: the server was
                # restarting or crashed, or the connection was killed) proves nothing either way:
                # counted as unanswered. So does one that could not run in its bound
                # (lock_not_available: SQLite's write lock busy past it; the engine re-sends that
                # release in the background, as after a lost answer). Only a passed owner check
                # ("ok") or another error is wrong.
                if x["u"] and x["u"]["result"] in ("lease_lost", "not_holder"):
                    self.stop_outcomes["renew_refused"] += 1
                elif x["u"] and x["u"]["result"] in ("connection_lost", "lock_not_available"):
                    self.stop_outcomes["unanswered"] += 1
                elif x["u"]:
                    self.v.add("stopped_holder_renewed", f"{name} token {token}: taken over while the holder was "
                                                         f"stopped, yet its renew gave {x['u']['result']}")
                if x["r"] and x["r"]["result"] in ("lease_lost", "not_holder"):
                    self.stop_outcomes["release_refused"] += 1
                elif x["r"] and x["r"]["result"] in ("connection_lost", "lock_not_available"):
                    self.stop_outcomes["unanswered"] += 1
                elif x["r"]:
                    self.v.add("stopped_holder_released", f"{name} token {token}: taken over while the holder "
                                                          f"was stopped, yet its release gave {x['r']['result']}")
                if x["u"] and x["u"]["lost"]:
                    self.stop_outcomes["guard_lost"] += 1
                elif x["u"]:
                    self.v.add("stopped_holder_not_lost", f"{name} token {token}: taken over while the holder "
                                                          "was stopped, yet its guard did not report lost")
                # Its write must be rejected when a later token's write was already applied.
                if x["w"]:
                    later = [r for r in aw_by_res.get(name, []) if r[1] > token]
                    written_before = [a for a in by_name[name] if a["token"] > token and a["w"] and
                                      a["w"]["applied"] == "1" and a["w"]["t_we"] < x["w"]["t_ws"]]
                    if written_before:
                        if x["w"]["applied"] == "1":
                            self.v.add("stale_write_applied", f"{name} token {token} applied after token "
                                                              f"{written_before[0]['token']}")
                        else:
                            self.stop_outcomes["write_rejected"] += 1
                    del later
        # Clock skew must not change behaviour: skewed workers acquire like the others, and no
        # lease is lost without a fault that explains it.
        self.by_skew = {}
        for a in acqs:
            k = a["skew"] or "none"
            self.by_skew[k] = self.by_skew.get(k, 0) + 1
        for k in {p.skew for p in self.lock_procs_all if p.skew}:
            if self.by_skew.get(k, 0) == 0 and o.duration >= 30:
                self.v.add("skewed_worker_starved", f"workers with clock {k} never acquired a lock")
        self.unexplained_losses = {}
        for a in acqs:
            lost = (a["u"] and a["u"]["result"] != "ok") or (a["r"] and a["r"]["result"] != "ok")
            end = a["r"]["t_re"] if a["r"] else (a["u"]["t_u1"] if a["u"] else None)
            if lost and end and not self.touched(a["pid"], a["t_ack"], end):
                k = a["skew"] or "none"
                self.unexplained_losses[k] = self.unexplained_losses.get(k, 0) + 1
                self.notes.append(f"lease lost with no fault on its process: {a['name']} token {a['token']} "
                                  f"pid {a['pid']} held {(end - a['t_ack']) / 1000:.0f} ms, renew "
                                  f"{a['u']['result'] if a['u'] else '-'}, release "
                                  f"{a['r']['result'] if a['r'] else '-'}")
        self.acquisitions = len(acqs)
        self.writes_applied = applied

    # ------------------------------------------------------------------ the history checker

    def read_history(self):
        """Every lock worker's O records, as dicts, in each worker's own order."""
        per_proc = []
        for p in views_of(self.lock_procs_all):
            recs = []
            for c in self.read_log(p.log_path):
                if c[0] == "O" and len(c) >= 7:
                    recs.append(check_history.op_record(c, p))
            per_proc.append((p, recs))
        return per_proc

    def fair_queue_held_until(self, waiter_pid, t_end):
        """A fair name: until when a waiter other than `waiter_pid` may have held the queue up with a
        ticket nobody renews. A ticket lives FAIR_TICKET_TTL_US past its last poll, and the last poll
        of a process that a fault hit (SIGSTOP, SIGKILL, a partition, a lost answer, a cut or killed
        connection, a delay) may be the fault's start; once it polls again it is a live waiter whose
        grant is an acquisition like any other. The latest fault start before t_end plus the ticket
        TTL (0 without one)."""
        return max((e["t"] + FAIR_TICKET_TTL_US for e in self.events
                    if e.get("pid") is not None and e["pid"] != waiter_pid and e["t"] < t_end), default=0)

    def lease_free_by(self, pid, t):
        """When the lease `pid` held at time t (its death) had certainly expired: t plus the TTL of
        its outer acquisition, or later when an inner guard of that hold had a longer TTL (a
        re-entry may lengthen the lease, and its release does not shorten it again). From the
        history; the driver's --ttl-ms without one."""
        if not hasattr(self, "per_proc"):
            self.per_proc = self.read_history()
        best = t + self.o.ttl_ms * 1000
        for p, recs in self.per_proc:
            if p.pid != pid:
                continue
            # Per lock loop (a thread of the process); the latest end over its loops.
            end, pending = t + self.o.ttl_ms * 1000, None
            for r in recs:
                if r["t"] > t:
                    break
                if r["phase"] == "invoke" and r["op"] in ("acquire", "inner_acquire"):
                    pending = (int(r["detail"].split(",")[0].split("=")[1]) if r["detail"].startswith("ttl=")
                               else None, r["t"])
                elif r["phase"] == "ok" and r["op"] == "acquire" and pending and pending[0]:
                    end = t + pending[0] * 1000
                elif r["phase"] == "ok" and r["op"] == "inner_acquire" and pending and pending[0]:
                    end = max(end, pending[1] + pending[0] * 1000)
            best = max(best, end)
        return best

    def write_history(self):
        """The recorded history, one file (check_history.py's input): every lock loop's O records,
        the driver's fault events and server restarts, the run's --permits."""
        self.history_path = os.path.join(self.out, "history.txt")
        check_history.write_history(self.history_path, self.read_history(), self.events, self.restarts,
                                    self.permits, self.stalls)

    def run_history_checker(self):
        """check_history.py on the recorded history, as its own program: its violations are this
        run's, its counts go into the summary."""
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_history.py"), "--json", self.history_path],
                           capture_output=True, text=True, timeout=600)
        try:
            res = json.loads(r.stdout)
        except ValueError:
            self.v.add("history_checker_failed", f"check_history.py exited {r.returncode}: {r.stderr.strip()[-400:]}")
            self.hist = {}
            return
        self.hist = res["counts"]
        for kind, detail in res["violations"]:
            self.v.add(kind, detail)

    def excused(self, pid, t0, t1):
        """True when a stop of this process or a server restart overlapped [t0, t1]."""
        for ev in self.events:
            if ev["kind"] == "stop" and ev["pid"] == pid and ev["t"] <= t1 and (ev["t_end"] or t1) >= t0:
                return True
        return self.restart_between(t0, t1)

    def touched(self, pid, t0, t1):
        """True when any fault that can cost a lease hit this process (or the server) in [t0, t1]."""
        for ev in self.events:
            if ev.get("pid") == pid and ev["t"] <= t1 and (ev.get("t_end") or ev["t"]) >= t0:
                return True
        return self.restart_between(t0, t1)

    def restart_between(self, t0, t1):
        margin = 5_000_000
        return any(r[0] <= t1 and (r[1] or t1) + margin >= t0 for r in self.restarts)

    def check_inventory(self, db, strategy, procs):
        acked = set()
        for p in procs:
            for c in self.read_log(p.log_path):
                if c[0] == "S":
                    acked.add((int(c[1]), int(c[2])))
        stock = db["stock"].get(strategy)
        sales = db["sales"].get(strategy, set())
        if stock is None:
            self.v.add("inventory_missing", f"{strategy}: no stock row")
            return 0, 0
        if stock < 0:
            self.v.add("negative_stock", f"{strategy}: stock is {stock}")
        if stock + len(sales) != self.o.stock:
            self.v.add("stock_mismatch", f"{strategy}: stock {stock} + {len(sales)} sales != {self.o.stock}")
        missing = acked - sales
        if missing:
            self.v.add("acknowledged_sale_missing", f"{strategy}: {len(missing)} acknowledged sales not in the "
                                                    f"database, e.g. {sorted(missing)[:3]}")
        return len(acked), stock

    # ------------------------------------------------------------------ the run

    def run(self):
        o = self.o
        t_start = time.monotonic()
        self.run_worker("setup", stock=o.stock)
        self.apply_durability()
        self.apply_pg_settings()
        if o.server_durability == "lazy" and self.backend == "mysql":
            self.check_refusal()
            if not o.accept_unsafe_durability:
                self.reset_durability()  # refused as it must be: the rest of the run on flush = 1
        # Inventory first (each strategy ends early once the stock is gone), then the lock phase
        # fills the rest of the duration, so a run lasts about --duration.
        inv_secs = max(8.0, o.duration * 0.4 / 3)
        inv = {}
        for strategy in (("atomic", "cas", "rowlock") if o.inventory == "on" else ()):
            procs, secs = self.inventory_phase(strategy, inv_secs)
            inv[strategy] = (procs, secs)
        lock_secs = max(15.0, o.duration - (time.monotonic() - t_start))
        try:
            self.lock_phase(lock_secs)
        finally:
            self.reset_pg_settings()
        self.reset_durability()
        admin = dict(admin_url=o.admin_url) if o.admin_url else {}  # to list open transactions on a stuck lock
        vr = self.run_worker("verify", check=False, ttl=self.ttl_top * 3, wait=o.wait_ms, **admin)
        verify_lines = [line.split("\t") for line in vr.stdout.split("\n") if line.startswith("V\t")]
        # What verify saw of a name it could not get: its held rows, the open transactions.
        self.verify_diag = [(f[1], " ".join(f[2:])) for f in (line.split("\t") for line in vr.stdout.split("\n"))
                            if f[0] == "D" and len(f) >= 3]
        if vr.returncode not in (0, 1):
            self.v.add("verify_failed", vr.stderr.strip()[:300])
        with open(os.path.join(self.out, "events.txt"), "w") as f:
            for ev in self.events:
                f.write(repr(ev) + "\n")
        db = self.dump()
        self.check_lock_phase(db, verify_lines)
        self.write_history()
        self.run_history_checker()
        inv_parts = []
        for strategy in inv:
            sold, stock = self.check_inventory(db, strategy, inv[strategy][0])
            inv_parts.append(f"{strategy}:acked={sold},stock={stock}")
        if self.backend == "sqlite" and db["integrity"] != ["ok"]:
            self.v.add("sqlite_corrupt", f"PRAGMA integrity_check: {db['integrity'][:5]}")
        if self.v.count() == 0 and not o.keep:
            self.run_worker("cleanup", check=False)
        printed = {}
        for kind, detail in self.v.items:
            printed[kind] = printed.get(kind, 0) + 1
            if printed[kind] <= o.print_max:
                print(f"VIOLATION {self.backend} {kind}: {detail}", file=sys.stderr)
        for kind, n in printed.items():
            if n > o.print_max:
                print(f"VIOLATION {self.backend} {kind}: ... {n - o.print_max} more not printed", file=sys.stderr)
        for note in self.notes[:10]:
            print(f"note {self.backend}: {note}", file=sys.stderr)
        faults = ",".join(f"{k}={v}" for k, v in self.faults.items())
        so = self.stop_outcomes
        # The holder faults that hit a fair hold or a reader-writer write hold (fault_worker
        # --fair-pct, --rw-pct: A lines on <prefix>_fair0, <prefix>_rwN).
        shape_faults = {}
        for ev in self.events:
            shape = ev.get("holding") and ("fair" if FAIR_NAME.search(ev["holding"][0]) else
                                           "rw" if RW_NAME.search(ev["holding"][0]) else None)
            if shape:
                k = ev["kind"] + ("_" + ev["sub"] if ev.get("sub") == "mid_tx" else "")
                shape_faults.setdefault(shape, {})[k] = shape_faults.get(shape, {}).get(k, 0) + 1
        fair_faults, rw_faults = (",".join(f"{k}={v}" for k, v in sorted(shape_faults.get(x, {}).items()))
                                  for x in ("fair", "rw"))
        skew = ",".join(f"{k}={v}" for k, v in sorted(self.by_skew.items()))
        unexplained = ",".join(f"{k}={v}" for k, v in sorted(self.unexplained_losses.items())) or "none"
        errs = ",".join(f"{k}={v}" for k, v in sorted(self.errors.items())) or "none"
        max_stall = max(((b - a) / 1000 for a, b in self.stalls), default=0.0)
        print(f"fault-summary backend={self.backend} duration={time.monotonic() - t_start:.0f}s "
              f"lock_phase={lock_secs:.0f}s "
              f"workers={o.workers} skewed={self.skewed} acquisitions={self.acquisitions} "
              f"writes_applied={self.writes_applied} faults[{faults}] "
              f"stops_taken_over={so['taken_over']}(write_rejected={so['write_rejected']},"
              f"renew_refused={so['renew_refused']},release_refused={so['release_refused']},unanswered={so['unanswered']},"
              f"guard_lost={so['guard_lost']},fair={so['fair_taken_over']},rw_writers={so['rw_taken_over']}) stops_after_release={so['released_first']} "
              f"fair_holder_faults[{fair_faults or 'none'}] rw_writer_faults[{rw_faults or 'none'}] "
              f"inventory_kills={self.inventory_kills} inventory_conn_kills={self.inventory_conn_kills} "
              f"inventory[{' '.join(inv_parts)}] "
              f"violations={self.v.count()} takeovers={self.takeovers} max_takeover_ms={self.max_takeover_ms:.0f} "
              f"(ttl={o.ttl_ms}ms) acquisitions_by_clock[{skew}] unexplained_lease_losses[{unexplained}] "
              f"worker_errors[{errs}] db_write_stalls={len(self.stalls)}(max_ms={max_stall:.0f},"
              f"excused={self.excused_by_stall}) "
              f"classes[{','.join(sorted(self.classes)) or 'none'}] "
              f"nest_pct={0 if self.permits else o.nest_pct}({o.nest_ttl}) permits={self.permits} "
              f"threads_per_client={o.threads_per_client}(loops={len(views_of(self.lock_procs_all))}) "
              f"pg_setting={o.pg_setting} cancel_pct={o.cancel_pct} race_pct={o.race_pct} "
              f"multi_pct={o.multi_pct} leader_pct={o.leader_pct} rw_pct={o.rw_pct} fair_pct={o.fair_pct} "
              f"tables={self.tables} "
              f"durability={o.server_durability}"
              f"{'(flush=%d)' % o.mysql_flush if o.server_durability == 'lazy' and self.backend == 'mysql' else ''}"
              f"{'(refusal_checked)' if self.refusal_checked else ''}"
              f"{'(unsafe_accepted)' if o.accept_unsafe_durability else ''} "
              f"crash_row_checks[judged={self.crash_checks['judged']},taken_since={self.crash_checks['taken_since']},rw_judged={self.crash_checks['rw_judged']}] "
              f"shared_holder={len(self.shared_slots)} ttl_ms={o.ttl_ms}-{max(o.ttl_ms, o.ttl_max_ms)} "
              f"history[{','.join(f'{k}={v}' for k, v in self.hist.items())}] "
              f"proxies[{self.proxy_totals()}] "
              f"violations_by_kind[{','.join(f'{k}={v}' for k, v in sorted(self.v.by_kind().items())) or 'none'}]",
              flush=True)
        return 0 if self.v.count() == 0 else 1


class LoggedProc:
    """A finished lock worker known only from its log (for --recheck)."""

    def __init__(self, path):
        self.log_path = path
        self.index = int(re.search(r"lock_(\d+)\.log$", path).group(1))
        first = next((c for c in Driver.read_log(path) if c[0] == "P"), None)
        self.pid = int(first[1]) if first else -self.index
        self.holder_label = first[4] if first and len(first) > 4 and first[4] else None
        self.skew = None
        self.threads = 1 + len(glob.glob(glob.escape(path) + ".t*"))


def recheck(directory, print_max, permits=0):
    """Runs the whole-history checks again on the logs a run kept (lock_*.log, events.txt); a run
    of this version also kept history.txt, which check_history.py reads directly."""
    import ast
    d = Driver.__new__(Driver)
    d.lock_procs_all = [LoggedProc(p) for p in sorted(glob.glob(os.path.join(directory, "lock_*.log")))]
    events = []
    ev_path = os.path.join(directory, "events.txt")
    if os.path.exists(ev_path):
        with open(ev_path) as f:
            events = [ast.literal_eval(line) for line in f if line.strip()]
    path = os.path.join(directory, "history.rechecked.txt")
    check_history.write_history(path, d.read_history(), events, [], permits)
    return check_history.main([path, "--print-max", str(print_max)])


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--recheck":
        # fault_driver.py --recheck DIR [PRINT_MAX [PERMITS]]: the history checker alone, on kept logs
        # (PERMITS: the run's --permits, for the semaphore checks).
        sys.exit(recheck(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5,
                         int(sys.argv[4]) if len(sys.argv) > 4 else 0))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", required=True, choices=["sqlite", "postgresql", "mysql"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--admin-url", default="")
    ap.add_argument("--restart-cmd", default="")
    ap.add_argument("--worker", required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--duration", type=parse_duration, default=parse_duration("75s"))
    ap.add_argument("--ttl-ms", type=int, default=2000)
    ap.add_argument("--wait-ms", type=int, default=3000)
    ap.add_argument("--names", type=int, default=3)
    ap.add_argument("--fault-interval", type=float, default=1.5, help="mean seconds between faults")
    ap.add_argument("--inventory-procs", type=int, default=16)
    ap.add_argument("--stock", type=int, default=10000)
    ap.add_argument("--skew", choices=["auto", "on", "off"], default="auto",
                    help="clock-skewed workers (+1h, -1h); auto = on")
    ap.add_argument("--keep", action="store_true", help="keep the tables after a clean run")
    ap.add_argument("--classes", default="all",
                    help="comma-separated fault classes to inject, or all / none: " + ",".join(ALL_KINDS))
    ap.add_argument("--proxy", default=None,
                    help="the fault_proxy binary (default: next to --worker); one per lock worker")
    ap.add_argument("--proxy-mode", choices=["auto", "on", "off"], default="auto",
                    help="put the lock workers behind proxies: auto = when a proxy class is selected")
    ap.add_argument("--nest-pct", type=int, default=25,
                    help="percent of acquisitions that nest a reentrant guard (inner TTL shorter or longer)")
    ap.add_argument("--nest-ttl", choices=["shorter", "longer", "both"], default="both",
                    help="inner TTLs shorter than the outer one, longer, or either")
    ap.add_argument("--ttl-max-ms", type=int, default=4000,
                    help="outer TTLs are drawn from [--ttl-ms, --ttl-max-ms]")
    ap.add_argument("--shared-holder", type=int, default=3,
                    help="this many lock workers share one holder label (0 or 1: none)")
    ap.add_argument("--inventory", choices=["on", "off"], default="on",
                    help="off: no inventory phase, the whole duration is the lock phase")
    ap.add_argument("--crash-cmd", default="",
                    help="a command that kills the server with SIGKILL and starts it again (crash classes)")
    ap.add_argument("--crash-interval", type=float, default=0,
                    help="mean seconds between server crashes (0: a quarter of the lock phase, 10-40 s)")
    ap.add_argument("--server-durability", choices=["default", "lazy"], default="default",
                    help="lazy: the server's default commit durability is made lazy for the run "
                         "(PostgreSQL synchronous_commit=off; MariaDB innodb_flush_log_at_trx_commit=--mysql-flush)")
    ap.add_argument("--mysql-flush", type=int, choices=[0, 2], default=0,
                    help="the innodb_flush_log_at_trx_commit of --server-durability lazy")
    ap.add_argument("--accept-unsafe-durability", action="store_true",
                    help="workers connect with sqllock_allow_unsafe_durability=on (to show what a lazy server loses)")
    ap.add_argument("--permits", type=int, default=0,
                    help="N >= 2: every name is a counting semaphore of N permits, lock workers take one "
                         "permit each (logged as NAME#SLOT); no nesting")
    ap.add_argument("--guard-pct", type=int, default=50,
                    help="percent of the fenced writes made in a guarded transaction (tx.require_lease)")
    ap.add_argument("--cancel-pct", type=int, default=8,
                    help="percent of the acquisitions that wait with a stop token cancelled at a random moment")
    ap.add_argument("--race-pct", type=int, default=8,
                    help="percent of the holds with a 150-400 ms TTL released at a random moment (releases racing "
                         "the watchdog's renewals)")
    ap.add_argument("--multi-pct", type=int, default=6,
                    help="percent of the iterations that take 2-3 names at once (try_acquire_all)")
    ap.add_argument("--leader-pct", type=int, default=6,
                    help="percent of the iterations that lead the name: half a leader_latch, half await_leadership")
    ap.add_argument("--rw-pct", type=int, default=6,
                    help="percent of the iterations that hold a reader-writer lease (half read, half write) on "
                         "<prefix>_rw0..1")
    ap.add_argument("--fair-pct", type=int, default=6,
                    help="percent of the iterations that take a fair lease (lease_options::fair, a ticket queue) "
                         "on <prefix>_fair0, a name only ever acquired fairly")
    ap.add_argument("--break", dest="break_", choices=["cancel", "race", "multi", "rw", "fair", "fair_stale"], default=None,
                    help="run a deliberately broken worker (to show the cancel / race / multi / rw / fair checks "
                         "can fail; fair_stale: a fair holder ignores the loss of its lease, writes unfenced and "
                         "logs a refused renew or release as ok, for the stopped-holder checks)")
    ap.add_argument("--pg-setting", default="default",
                    help="PostgreSQL server settings for the run, comma-separated: serializable "
                         "(default_transaction_isolation, by ALTER SYSTEM), pgbouncer (every client through "
                         "PgBouncer in transaction mode: --pgbouncer-url or SQLLOCK_TEST_PGBOUNCER_URL)")
    ap.add_argument("--pgbouncer-url", default=os.environ.get("SQLLOCK_TEST_PGBOUNCER_URL", ""))
    ap.add_argument("--threads-per-client", default="mix",
                    help="lock loops per worker process, threads sharing one client: 1 to 16, or mix (one "
                         "process of 2, 4, 8 or 16 threads, drawn at each respawn; the others 1)")
    ap.add_argument("--tables", type=int, default=2,
                    help="lock tables on the server (1-3): worker slot s uses table s %% N, the same names "
                         "(logged <name>@<k>), so every check is per table and name; 1 with --permits")
    ap.add_argument("--print-max", type=int, default=5, help="violations printed per kind")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", required=True, help="directory for the per-process logs")
    o = ap.parse_args()
    if o.proxy is None:
        o.proxy = os.path.join(os.path.dirname(os.path.abspath(o.worker)), "fault_proxy")
    if o.seed is None:
        o.seed = int.from_bytes(os.urandom(4), "little")
    if o.permits == 1 or o.permits < 0:
        ap.error("--permits must be 0 (locks) or at least 2")
    if o.threads_per_client != "mix" and not (o.threads_per_client.isdigit() and 1 <= int(o.threads_per_client) <= 16):
        ap.error("--threads-per-client: 1 to 16, or mix")
    if not 1 <= o.tables <= 3:
        ap.error("--tables: 1 to 3")
    bad = set(o.pg_setting.split(",")) - {"default", "serializable", "pgbouncer"}
    if bad:
        ap.error(f"--pg-setting: unknown {sorted(bad)} (known: default, serializable, pgbouncer)")
    if "pgbouncer" in o.pg_setting.split(",") and o.backend == "postgresql":
        if not o.pgbouncer_url:
            ap.error("--pg-setting pgbouncer needs --pgbouncer-url or SQLLOCK_TEST_PGBOUNCER_URL "
                     "(scripts/pgbouncer-server.sh start DIR PG_ENV)")
        o.url = o.pgbouncer_url  # workers, proxies, setup and verify all go through PgBouncer
    if o.backend != "sqlite" and not o.admin_url:
        ap.error("--admin-url is required for server backends (connection kills)")
    print(f"fault {o.backend}: seed {o.seed}, logs in {o.out}", file=sys.stderr, flush=True)
    sys.exit(Driver(o).run())


if __name__ == "__main__":
    main()
