#!/usr/bin/env python3
"""Power loss for SQLite: writes not fsynced are lost, then every invariant must still hold.

    powerloss_test.py shim    --shim LIB                      the shim really drops unsynced writes
    powerloss_test.py sqllock --shim LIB --worker FAULT_WORKER [--rounds N] [--seed S] [--workers K]

`shim`: raw sqlite3 (Python's module, no sqllock) in WAL mode under the shim commits rows with
synchronous = OFF, NORMAL and FULL, is SIGKILLed and the plug pulled (powerloss.py): with OFF and
NORMAL the committed rows must be gone (else the shim loses nothing and proves nothing), with FULL
every row must be there; PRAGMA integrity_check ok in all three.

`sqllock`: per round, K (6) `fault_worker lock` processes under the shim acquire, renew, write fenced and
release 4 names on one SQLite file, logging each acknowledged operation with one write(2) to a log
outside the watched directory; at a random moment all are SIGKILLed and the plug pulled. Then
(without the shim): integrity_check ok; per name the lock row's token >= every acknowledged token;
an acknowledged release is not still held with its token; every acknowledged applied fenced write
is in the `aw` table; a fresh acquisition (`fault_worker verify`) gets a token above every
acknowledged one. One `powerloss-round` line per round, a `powerloss-summary` line, exit 1 on any
violation. Every setting comes from --seed (printed), so a failing round can be rerun.
"""
import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import powerloss  # noqa: E402


def shim_env(shim, directory, journal):
    env = dict(os.environ)
    env["LD_PRELOAD"] = shim
    env["SQLLOCK_POWERLOSS_DIR"] = directory.rstrip("/") + "/"
    env["SQLLOCK_POWERLOSS_JOURNAL"] = journal
    return env


# ------------------------------------------------------------------ the shim's own proof

CHILD = r"""
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE t (x INTEGER)")
db.execute("PRAGMA synchronous=" + sys.argv[2])
for i in range(int(sys.argv[3])):
    db.execute("INSERT INTO t VALUES (?)", (i,))   # each its own committed transaction
print("committed", flush=True)
time.sleep(60)                                     # connection open: no checkpoint at close
"""


def shim_case(shim, sync, rows):
    base = os.path.realpath(tempfile.mkdtemp(prefix="sqllock-powerloss-shim."))
    try:
        d = os.path.join(base, "db")
        os.mkdir(d)
        journal = os.path.join(base, "journal")
        path = os.path.join(d, "t.db")
        p = subprocess.Popen([sys.executable, "-c", CHILD, path, sync, str(rows)],
                             env=shim_env(shim, d, journal), stdout=subprocess.PIPE, text=True)
        line = p.stdout.readline().strip()
        p.send_signal(signal.SIGKILL)
        p.wait()
        if line != "committed":
            return f"child failed: {line!r}"
        undone = powerloss.rollback(journal, d)
        db = sqlite3.connect(path)
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        try:
            n = db.execute("SELECT count(*) FROM t").fetchone()[0]
        except sqlite3.OperationalError as e:
            n = f"error: {e}"
        db.close()
        print(f"powerloss-shim synchronous={sync} committed={rows} after_power_loss={n} undone={undone} "
              f"integrity={integrity}", flush=True)
        bad = []
        if integrity != "ok":
            bad.append(f"integrity_check {integrity}")
        if sync == "FULL" and n != rows:
            bad.append(f"synchronous=FULL lost committed rows: {n} of {rows} left")
        if sync != "FULL" and n != 0:
            bad.append(f"synchronous={sync}: {n} of {rows} unsynced rows survived the power loss "
                       f"(the shim does not drop unsynced writes)")
        return "; ".join(bad)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_shim(o):
    bad = [f"{s}: {b}" for s in ("OFF", "NORMAL", "FULL") if (b := shim_case(o.shim, s, 50))]
    for b in bad:
        print("VIOLATION", b)
    return 1 if bad else 0


# ------------------------------------------------------------------ sqllock under power loss

def read_history(paths):
    """Acknowledged operations from the workers' `O` lines: (op, name, token, detail)."""
    acks = []
    for p in paths:
        try:
            with open(p, errors="replace") as f:
                for line in f:
                    c = line.rstrip("\n").split("\t")
                    if len(c) >= 6 and c[0] == "O" and c[2] == "ok":
                        acks.append((c[3], c[4], int(c[5]), c[6] if len(c) > 6 else ""))
        except FileNotFoundError:
            pass
    return acks


def acknowledged_after(seen, within_s, procs, poll_s=0.0005):
    """Whether a worker logs an acknowledged acquisition past the offsets `seen` (log -> bytes)
    within `within_s` seconds, looking every `poll_s` (half a millisecond: it returns within a
    millisecond or two of the log line). False at once when every worker in `procs` has exited
    (they run until killed: all of them died)."""
    deadline = time.monotonic() + within_s
    while True:
        for log, offset in seen.items():
            try:
                with open(log, "rb") as f:
                    f.seek(offset)
                    if b"\tok\tacquire\t" in f.read():
                        return True
            except FileNotFoundError:
                continue
        if time.monotonic() >= deadline or all(p.poll() is not None for p in procs):
            return False
        time.sleep(poll_s)


def sqllock_round(o, rnd, seed):
    rng = random.Random(seed)
    base = os.path.realpath(tempfile.mkdtemp(prefix="sqllock-powerloss."))
    d = os.path.join(base, "db")
    os.mkdir(d)
    journal = os.path.join(base, "journal")
    url = f"sqlite:{d}/pl.db"
    prefix, names = "pl", 4
    ttl = rng.choice([300, 500, 800])
    common = ["--url", url, "--prefix", prefix, "--names", str(names)]
    v = []
    # The initial state (migrated schema, tables) is made without the shim: durable by fiat.
    subprocess.run([o.worker, "setup", *common], check=True, timeout=60)
    env = shim_env(o.shim, d, journal)
    logs, procs = [], []
    for i in range(o.workers):
        log = os.path.join(base, f"lock_{i}.log")
        logs.append(log)
        procs.append(subprocess.Popen(
            [o.worker, "lock", *common, "--ttl", str(ttl), "--ttl-max", str(ttl * 2), "--wait", "500",
             "--nest-pct", "20", "--log", log, "--index", str(i)],
            env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, f"lock_{i}.stderr"), "w")))
    started = time.monotonic()
    run_s = rng.uniform(1.5, o.max_run_s)
    # Half the rounds cut at a random moment; the other half right after the first acquisition
    # acknowledged once run_s has passed (the moment an unsynced commit would be lost), within a
    # millisecond or two of the worker logging it. Neither cuts before the workers' first
    # acknowledged acquisition: on a loaded machine the workers can take longer than run_s to
    # start, and a cut before they write anything tests nothing (and the shim, having seen no sync,
    # could not be told from one that watches nothing).
    cut = rng.choice(["random", "after_ack"])
    if not acknowledged_after({log: 0 for log in logs}, 30, procs, poll_s=0.005):
        v.append("no_progress: no worker acknowledged an acquisition within 30 s (or all of them died)")
    time.sleep(max(0.0, started + run_s - time.monotonic()))
    if cut == "after_ack":
        seen = {log: os.path.getsize(log) if os.path.exists(log) else 0 for log in logs}
        cut = "after_ack" if acknowledged_after(seen, 5, procs) else "after_ack_timeout"
    for p in procs:  # the power goes: every process dies at once, mid-whatever
        p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait()
    undone = powerloss.rollback(journal, d)
    syncs = sum(1 for r in powerloss.read_journal(journal)[0] if r[0] == "S") if os.path.exists(journal) else 0
    if syncs == 0:
        v.append("shim_inactive: the journal recorded no sync: the shim did not watch the workers' writes")

    acks = read_history(logs)
    acquired = [a for a in acks if a[0] == "acquire"]
    db = sqlite3.connect(f"{d}/pl.db")
    integrity = [r[0] for r in db.execute("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        v.append(f"integrity_check: {integrity[:3]}")
    rows = {n: (t, h) for n, t, h in db.execute(
        "SELECT name, token, holder_id IS NOT NULL FROM sqllock_locks WHERE name LIKE ?", (prefix + "_lock%",))}
    aw = set(db.execute(f"SELECT res_id, token FROM {prefix}_aw"))
    db.close()
    max_ack = {}
    for _op, name, token, _detail in acquired:
        max_ack[name] = max(max_ack.get(name, 0), token)
    for name, token in sorted(max_ack.items()):
        row = rows.get(name)
        if row is None:
            v.append(f"acquisition_lost: {name}: token {token} acknowledged, no lock row after the power loss")
        elif row[0] < token:
            v.append(f"acquisition_lost: {name}: token {token} acknowledged, the row has token {row[0]} "
                     f"after the power loss (that token can be handed out again)")
    for op, name, token, _detail in acks:
        if op == "release" and name in rows and rows[name] == (token, 1):
            v.append(f"release_lost: {name}: release of token {token} acknowledged, the row is still held with it")
        if op == "write" and _detail == "applied" and (name, token) not in aw:
            v.append(f"applied_write_missing: {name}: fenced write of token {token} acknowledged, not in aw")
    # A fresh process (no shim) gets every name, with a token above every acknowledged one.
    r = subprocess.run([o.worker, "verify", *common, "--ttl", str(ttl * 2), "--wait", "5000"],
                       capture_output=True, text=True, timeout=120)
    fresh = {}
    for line in r.stdout.splitlines():
        c = line.split("\t")
        if len(c) >= 4 and c[0] == "V":
            fresh[c[1]] = (int(c[2]), c[3])
    for i in range(names):
        name = f"{prefix}_lock{i}"
        tok, status = fresh.get(name, (0, "missing"))
        if status != "ok":
            v.append(f"verify: {name}: {status} {r.stderr.strip()[-200:]}")
        elif tok <= max_ack.get(name, 0):
            v.append(f"token_reused: {name}: a new acquisition got token {tok}, acknowledged before the power "
                     f"loss: {max_ack[name]}")
    print(f"powerloss-round {rnd} seed={seed} ttl_ms={ttl} run_s={run_s:.2f} cut={cut} acquisitions={len(acquired)} "
          f"releases={sum(1 for a in acks if a[0] == 'release')} "
          f"writes={sum(1 for a in acks if a[0] == 'write')} undone_writes={undone} "
          f"max_acked={max_ack} rows={ {n: t for n, (t, _h) in sorted(rows.items())} } "
          f"fresh={ {n: t for n, (t, _s) in sorted(fresh.items())} } violations={len(v)}", flush=True)
    for x in v[:8]:
        print("VIOLATION", x, flush=True)
    if len(v) > 8:
        print(f"VIOLATION ... and {len(v) - 8} more in this round", flush=True)
    if v or o.keep:
        print(f"powerloss: kept {base}", flush=True)
    else:
        shutil.rmtree(base, ignore_errors=True)
    return v, len(acquired), undone


def run_sqllock(o):
    seed = o.seed if o.seed is not None else random.SystemRandom().randrange(1 << 30)
    print(f"powerloss: seed={seed} rounds={o.rounds} workers={o.workers}", flush=True)
    rng = random.Random(seed)
    total, rounds_bad, acquisitions, undone = 0, 0, 0, 0
    for rnd in range(o.rounds):
        v, n, u = sqllock_round(o, rnd, rng.randrange(1 << 30))
        total += len(v)
        rounds_bad += 1 if v else 0
        acquisitions += n
        undone += u
    print(f"powerloss-summary seed={seed} rounds={o.rounds} acknowledged_acquisitions={acquisitions} "
          f"undone_writes={undone} rounds_with_violations={rounds_bad} violations={total}", flush=True)
    return 1 if total else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["shim", "sqllock"])
    ap.add_argument("--shim", required=True)
    ap.add_argument("--worker")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--max-run-s", type=float, default=4.0)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--keep", action="store_true")
    o = ap.parse_args()
    o.shim = os.path.abspath(o.shim)
    if not os.path.isfile(o.shim):  # ld.so only warns about a missing preload and runs without it
        ap.error(f"no shim at {o.shim}")
    if o.mode == "shim":
        return run_shim(o)
    if not o.worker:
        ap.error("sqllock needs --worker")
    return run_sqllock(o)


if __name__ == "__main__":
    sys.exit(main())
