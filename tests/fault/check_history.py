#!/usr/bin/env python3
"""The fault harness's history checker, a program of its own: reads one recorded history file
(history.txt, written by fault_driver.py at the end of every run) and checks it against the model
of a lease lock, per name. fault_driver.py runs it on every run; run it by hand to re-check a kept
history offline (after changing a check, or on a history from another machine):

    tests/fault/check_history.py [--print-max N] [--json] HISTORY

Exit 0: no violation; 1: violations (printed, each with the smallest window of history that shows
it); 2: unreadable input.

The history file, tab-separated lines, in this order (times: CLOCK_MONOTONIC microseconds):
    R  permits  N                           the run's --permits (0: plain locks)
    S  t_start  t_end                       a server restart or crash (t_end empty: never ended)
    T  t_start  t_end                       a database write stall: the probe's writes all failed
                                            or hung for over 500 ms (fault_driver.db_stalls)
    F  {python literal of the event dict}   a fault the driver injected: kind, t, pid, t_end, ...
    L  pid  thread  index  label  threads   a lock loop (a process, or thread k of one); its O
                                            records follow, in the loop's own order
    O  t  phase  op  name  token  detail    one operation event (see fault_worker.cpp's header)

Checks (see tests/fault/README.md, "Checking"): critical sections of different loops never overlap
per name (late_loss_report when the earlier holder was told of its loss only afterwards); no token
handed out twice, and a reader-writer lease's tokens (readers and writers alike) increase in grant
order; semaphores never over capacity; guarded writes never commit after a takeover; a
cancelled wait or a failed multi-lock set leaves no lease behind; an acknowledged release is never
undone by a renewal racing it; fair leases are granted in ticket order, with increasing tokens,
within their wait bound.
"""
import argparse
import ast
import json
import sys


# Fair leases (check_fair): a waiter takes its ticket in its first poll, right after its invoke, so
# two waiters that invoked less than this apart may hold their tickets in either order ("the same
# instant"); and the margin past its wait bound that a fair acquire call may take to return.
FAIR_SAME_INSTANT_US = 500_000
FAIR_WAIT_MARGIN_US = 2_000_000


def base_name(name):
    """The semaphore of a logged <semaphore>#<slot> (a lock name unchanged)."""
    sem, hash_, _ = name.rpartition("#")
    return sem if hash_ else name


class Violations:
    def __init__(self):
        self.items = []

    def add(self, kind, detail):
        self.items.append((kind, detail))

    def count(self):
        return len(self.items)

    def by_kind(self):
        out = {}
        for k, _ in self.items:
            out[k] = out.get(k, 0) + 1
        return out


class Loop:
    """One lock loop of the history (a worker process, or one thread of it)."""

    def __init__(self, pid, k, index, label, threads):
        self.pid = pid
        self.k = k
        self.who = (pid, k)
        self.index = index
        self.holder_label = label or None
        self.threads = threads
        self.proc = self  # (check_after_checks reads p.proc.threads)


def write_history(path, per_proc, events, restarts, permits, stalls=()):
    """The driver's side: per_proc as fault_driver.Driver.read_history() returns it."""
    with open(path, "w") as f:
        f.write(f"R\tpermits\t{permits or 0}\n")
        for t0, t1 in restarts:
            f.write(f"S\t{t0}\t{'' if t1 is None else t1}\n")
        for t0, t1 in stalls:
            f.write(f"T\t{t0}\t{t1}\n")
        for ev in events:
            f.write("F\t" + repr(ev) + "\n")
        for p, recs in per_proc:
            threads = getattr(getattr(p, "proc", p), "threads", 1)
            f.write(f"L\t{p.pid}\t{getattr(p, 'k', 0)}\t{p.index}\t{p.holder_label or ''}\t{threads}\n")
            for r in recs:
                f.write(f"O\t{r['t']}\t{r['phase']}\t{r['op']}\t{r['name']}\t{r['token']}\t{r['detail']}\n")


def op_record(c, p):
    """One operation of a worker log's `O t phase op name token detail` line (c, split on tabs) as
    the dict the checks read, tagged with its lock loop p (pid, who, index, holder_label). The one
    parser of O records: fault_driver.py reads the live worker logs with it too."""
    return dict(t=int(c[1]), phase=c[2], op=c[3], name=c[4], token=int(c[5]), detail=c[6],
                pid=p.pid, who=p.who, index=p.index, label=p.holder_label or "")


def read_history(path):
    """(per_proc, events, restarts, permits, stalls) from a history file."""
    per_proc, events, restarts, permits, stalls = [], [], [], 0, []
    cur = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            c = line.rstrip("\n").split("\t")
            if not c or not c[0]:
                continue
            if c[0] == "R" and c[1] == "permits":
                permits = int(c[2])
            elif c[0] == "S":
                restarts.append((int(c[1]), int(c[2]) if c[2] else None))
            elif c[0] == "T":
                stalls.append((int(c[1]), int(c[2])))
            elif c[0] == "F":
                events.append(ast.literal_eval(c[1]))
            elif c[0] == "L":
                index = int(c[3]) if c[3].lstrip("-").isdigit() else c[3]
                p = Loop(int(c[1]), int(c[2]), index, c[4], int(c[5]))
                cur = (p, [])
                per_proc.append(cur)
            elif c[0] == "O" and cur is not None and len(c) >= 7:
                cur[1].append(op_record(c, cur[0]))
            else:
                raise ValueError(f"{path}:{n}: unexpected line {line[:80]!r}")
    return per_proc, events, restarts, permits, stalls


class Checker:
    def __init__(self, per_proc, events, restarts, permits, stalls=()):
        self.per_proc = per_proc
        self.events = events
        self.restarts = restarts
        self.permits = permits
        self.stalls = list(stalls)
        self.v = Violations()
        self.hist = {}

    def critical_sections(self, per_proc):
        """Per lock loop and name: from an acquire's ok to the first of its release's invoke, a loss
        report to it, or its death (SIGKILL by the driver). A loop holds several names at once only
        in a multi-lock (acquire_all). A loss reported between the acquire's invoke and its ok, for
        the token the ok then names (the answer came after the lease had run out by the client's
        clock: on_lost fired inside the call), ends the section at the ok: it holds nothing."""
        kills = {ev["pid"]: ev["t"] for ev in self.events if ev["kind"] == "kill"}
        out = []
        for p, recs in per_proc:
            cur = {}  # name -> the open critical section
            t_inv = {}
            lost_early = {}  # name -> {token: loss record} reported since the acquire's invoke
            for r in recs:
                name = r["name"]
                if r["op"] == "acquire" and r["phase"] == "invoke":
                    t_inv[name] = r["t"]
                    lost_early[name] = {}
                if r["phase"] == "lost" and not (name in cur and cur[name]["e"] is None):
                    lost_early.setdefault(name, {})[r["token"]] = r
                if r["op"] == "acquire" and name in cur and cur[name]["e"] is None and (
                        r["phase"] == "ok" or (r["phase"] == "fail" and cur[name]["start"]["detail"] == "multi_partial")):
                    # A section still open when this thread acquires the name again, or when its
                    # multi-lock call for it fails: a multi-lock's partial hold whose give-back was
                    # never logged (its release failed and is re-sent in the background, or the
                    # lease was lost). It ends here at the latest as far as this history can tell
                    # (a lower bound, like every partial hold's end).
                    c = cur[name]
                    c["e"], c["how"], c["end"] = r["t"], "give-back not logged; the multi-lock call ended", r
                if r["op"] == "acquire" and r["phase"] == "ok":
                    cur[name] = dict(name=name, token=r["token"], pid=p.pid, who=p.who, index=p.index,
                                     label=r["label"], s=r["t"], e=None, how=None, start=r,
                                     t_inv=t_inv.get(name) or r["t"])
                    out.append(cur[name])
                    early = lost_early.get(name, {}).get(r["token"])
                    if early:
                        cur[name].update(e=r["t"], end=early, lost_before_return=True,
                                         how=f"told of its loss ({early['op']}, {early['detail']}) before its "
                                             "acquire returned")
                elif name in cur and cur[name]["e"] is None:
                    c = cur[name]
                    if r["phase"] == "lost":
                        c["e"], c["how"], c["end"] = r["t"], f"told of its loss ({r['op']}, {r['detail']})", r
                    elif r["op"] == "release" and r["phase"] == "invoke":
                        c["e"], c["how"], c["end"] = r["t"], "release invoked", r
                if r["op"] == "release" and r["phase"] != "invoke":
                    cur.pop(name, None)
            for c in cur.values():
                if c["e"] is None:
                    t_end = kills.get(p.pid, max((r["t"] for r in recs), default=c["s"]))
                    c["e"], c["how"], c["end"] = t_end, "process killed" if p.pid in kills else "log ends", None
        return out

    def window(self, per_proc, name, x, x_t1, y, limit=14):
        """The smallest window of `name`'s history that shows a conflict between critical sections
        x and y: x's records from its acquisition to x_t1, y's from its acquire invoke to its ok;
        merged in time order, as printable lines (times relative to x's acquisition)."""
        t0 = x["s"]
        recs = sorted((r for _, rs in per_proc for r in rs if r["name"] in (name, base_name(name)) and (
            (r["who"] == x["who"] and x["s"] <= r["t"] <= x_t1) or
            (r["who"] == y["who"] and y["t_inv"] <= r["t"] <= y["s"]))), key=lambda r: r["t"])
        lines = [f"      {(r['t'] - t0) / 1000:+11.3f} ms  worker {r['index']:>4} pid {r['pid']:>7}"
                 f"{' label ' + r['label'] if r['label'] else ''}: {r['phase']:<7} {r['op']:<13} "
                 f"token {r['token']} {r['detail']}" for r in recs]
        if len(lines) > limit:
            lines = lines[:limit // 2] + [f"      ... {len(lines) - limit} more ..."] + lines[-limit // 2:]
        return "\n" + "\n".join(lines)


    def check(self):
        """Whole-history checks, per name: no two critical sections of different workers overlap
        (CLOCK_MONOTONIC on one machine orders them; no margin); no token handed out twice; a
        holder told of its loss no later than another acquired. Each violation prints the smallest
        window of history that shows it."""
        per_proc = self.per_proc
        css = self.critical_sections(per_proc)
        self.hist = dict(critical_sections=len(css), overlap=0, late_loss_report=0, token_reused=0,
                         excused_paused=0, guarded_writes=0, stale_guarded_write=0, rw_read_overlaps=0, rw_token_order=0,
                         rw_holds=sum(cs["start"]["detail"] in ("read", "write") for cs in css))
        self.check_guarded_writes(per_proc)
        stops = [ev for ev in self.events if ev["kind"] == "stop"]
        by_name = {}
        for cs in css:
            by_name.setdefault(cs["name"], []).append(cs)
        for name, lst in by_name.items():
            lst.sort(key=lambda c: c["s"])
            active = []
            for y in lst:
                active = [x for x in active if x["e"] > y["s"]]
                if y.get("lost_before_return"):
                    # Told of its loss before its acquire returned: it held nothing, so it overlaps
                    # nothing (CI, PostgreSQL: a 227 ms lease answered 4.7 s late returned inside
                    # another worker's hold, 148 ms after its on_lost).
                    self.hist["lost_before_return"] = self.hist.get("lost_before_return", 0) + 1
                    continue
                for x in active:
                    if x["who"] == y["who"]:
                        continue
                    if x["start"]["detail"] == "read" and y["start"]["detail"] == "read":
                        self.hist["rw_read_overlaps"] += 1  # readers of a reader-writer lease share it
                        continue
                    # A frozen process (SIGSTOP, the GC pause) cannot be told in time: fencing covers
                    # it, checked elsewhere (stale_write_applied, stopped_holder_*).
                    if any(ev["pid"] == x["pid"] and ev["t"] <= y["s"] and (ev["t_end"] or y["s"]) >= x["s"]
                           for ev in stops):
                        self.hist["excused_paused"] += 1
                        continue
                    kind = "late_loss_report" if x["how"].startswith("told") else "overlap"
                    self.hist[kind] += 1
                    shared = " (both given holder label " + x["label"] + ")" if x["label"] and \
                        x["label"] == y["label"] else ""
                    self.v.add(kind, f"{name}: worker {x['index']} (token {x['token']}) held from +0 to "
                                     f"+{(x['e'] - x['s']) / 1000:.3f} ms ({x['how']}); worker {y['index']} "
                                     f"acquired token {y['token']} at +{(y['s'] - x['s']) / 1000:.3f} ms{shared}:" +
                               self.window(per_proc, name, x, x["e"], y))
                active.append(y)
            seen = {}
            for y in lst:
                x = seen.get(y["token"])
                if x:
                    self.hist["token_reused"] += 1
                    self.v.add("token_reused", f"{name}: token {y['token']} handed out to worker {x['index']} at +0 "
                                               f"and again to worker {y['index']} at +{(y['s'] - x['s']) / 1000:.3f} ms:" +
                               self.window(per_proc, name, x, x["e"], y))
                else:
                    seen[y["token"]] = y
            self.check_rw_token_order(per_proc, name, lst)
        if getattr(self, "permits", 0):
            self.check_semaphores(per_proc, css, stops)
        self.check_after_checks(per_proc)
        self.check_fair(per_proc)

    def check_rw_token_order(self, per_proc, name, lst):
        """A reader-writer lease has one fencing sequence per name, readers and writers alike: a hold
        whose acquire was invoked after another hold's acquire was acknowledged has the greater
        token (holds acquired concurrently may be granted in either order)."""
        rw = [c for c in lst if c["start"]["detail"] in ("read", "write")]
        if not rw:
            return
        by_ok = sorted(rw, key=lambda c: c["s"])
        i, top = 0, None  # top: the hold with the greatest token acknowledged so far
        for y in sorted(rw, key=lambda c: c["t_inv"]):
            while i < len(by_ok) and by_ok[i]["s"] < y["t_inv"]:
                if top is None or by_ok[i]["token"] > top["token"]:
                    top = by_ok[i]
                i += 1
            if top is not None and y["token"] <= top["token"]:
                self.hist["rw_token_order"] += 1
                self.v.add("rw_token_order", f"{name}: {y['start']['detail']} token {y['token']} (worker {y['index']}, "
                                             f"invoked at +{(y['t_inv'] - top['s']) / 1000:.3f} ms) not above "
                                             f"{top['start']['detail']} token {top['token']} (worker {top['index']}) "
                                             f"acknowledged before it at +0:" +
                           self.window(per_proc, name, top, top["e"], y))

    def check_after_checks(self, per_proc):
        """The `check` records (inspect() of the lock row) after a cancelled wait and after an
        acknowledged release of a short lease racing its renewals (worker --cancel-pct, --race-pct).
        after_release: the row must not show the released token again (a renewal in flight, or
        sent late, must not bring the lease back); no excuse, a fault cannot make it right.
        after_cancel: the row must not be held under this worker's own label with a token it was
        never given (the cancelled acquisition left a lease behind); the same after a multi-lock set
        that was not acquired (after_multi_fail: all or nothing). A worker whose label is shared, or
        whose process runs several lock loops, is not judged, and one touched by a fault (or a server restart) since the invoke is excused:
        an acquire whose answer was lost may leave a row that simply expires."""
        self.hist.update(cancelled_waits=0, cancel_checks=0, multi_fail_checks=0, check_unjudged_threads=0,
                         cancel_excused=0, cancel_leak=0, multi_leak=0,
                         race_releases=0, release_checks=0, released_lease_resurrected=0, multi_leases=0,
                         multi_partial_holds=0,
                         latch_terms=0, await_leadership=0)
        labels = {}
        for p, _ in per_proc:
            if getattr(p, "holder_label", None):
                labels.setdefault(p.holder_label, set()).add(p.pid)
        labels = {k: len(v) for k, v in labels.items()}
        # A multi-lock's partial holds (taken, then given back inside the call) do not count: the
        # set's all-or-nothing check is about exactly those tokens still being held afterwards.
        acknowledged = {(r["name"], r["token"]) for _, recs in per_proc for r in recs
                        if r["op"] == "acquire" and r["phase"] == "ok" and r["detail"] != "multi_partial"}
        for p, recs in per_proc:
            t_cancel_inv = {}
            released = {}
            for r in recs:
                if r["op"] == "acquire" and r["phase"] == "invoke":
                    t_cancel_inv[r["name"]] = r["t"]
                elif r["op"] == "acquire" and r["phase"] == "ok":
                    if r["detail"] == "latch":
                        self.hist["latch_terms"] += 1
                    elif r["detail"] == "multi":
                        self.hist["multi_leases"] += 1
                    elif r["detail"] == "multi_partial":
                        self.hist["multi_partial_holds"] += 1
                    elif r["detail"].endswith("await_leadership"):
                        self.hist["await_leadership"] += 1
                elif r["op"] == "acquire" and r["detail"] == "cancelled":
                    self.hist["cancelled_waits"] += 1
                elif r["op"] == "release" and r["phase"] == "ok" and r["detail"] == "race":
                    self.hist["race_releases"] += 1
                    released[r["name"]] = r
                elif r["phase"] == "check" and r["op"] == "after_release":
                    rel = released.pop(r["name"], None)
                    if rel is None or r["token"] <= 0:
                        continue
                    self.hist["release_checks"] += 1
                    if r["token"] == rel["token"]:
                        self.hist["released_lease_resurrected"] += 1
                        self.v.add("released_lease_resurrected",
                                   f"{r['name']}: worker {p.index} pid {p.pid} was acknowledged the release of token "
                                   f"{rel['token']}, yet {(r['t'] - rel['t']) / 1000:.3f} ms later the lock row holds "
                                   f"that token again ({r['detail']}):" + self.simple_window(recs, rel["t"], r["t"], r["name"]))
                elif r["phase"] == "check" and r["op"] in ("after_cancel", "after_multi_fail"):
                    self.hist["cancel_checks" if r["op"] == "after_cancel" else "multi_fail_checks"] += 1
                    fields = dict(kv.split("=", 1) for kv in r["detail"].split(",") if "=" in kv)
                    holder, me = fields.get("holder", ""), fields.get("self", "")
                    if r["token"] <= 0 or holder != me or labels.get(me, 0) > 1:
                        continue
                    if getattr(p.proc, "threads", 1) > 1:
                        # Another thread of the process shares the label, and a set it is still
                        # acquiring (or failed to) holds names under tokens never acknowledged.
                        self.hist["check_unjudged_threads"] += 1
                        continue
                    if (r["name"], r["token"]) in acknowledged:
                        continue  # a lease somebody was given (e.g. a release of its own still being re-sent)
                    t0 = t_cancel_inv.get(r["name"], r["t"])
                    if self.touched_safe(p.pid, t0, r["t"]):
                        self.hist["cancel_excused"] += 1
                        continue
                    multi = r["op"] == "after_multi_fail"
                    self.hist["multi_leak" if multi else "cancel_leak"] += 1
                    self.v.add("multi_lock_not_all_or_nothing" if multi else "cancelled_acquisition_leaked",
                               f"{r['name']}: worker {p.index} pid {p.pid} "
                               f"{'failed to acquire its set (acquire_all)' if multi else 'had its wait cancelled'}, yet "
                               f"{(r['t'] - t0) / 1000:.3f} ms after the acquire began the lock row is held under its "
                               f"own label with token {r['token']}, which it was never given ({r['detail']}):" +
                               self.simple_window(recs, t0, r["t"], r["name"]))

    def fair_calls(self, per_proc):
        """Every fair acquire call of the history (worker --fair-pct: an invoke whose detail has the
        field fair, and wait=MS, ticket_ttl=MS), by name: who, pid, index, t_inv, t_end (its outcome's
        record; for a call with no outcome, its process's SIGKILL or the end of its log), outcome
        (ok, fail, unknown, or killed / none with no outcome), detail, token."""
        kills = {ev["pid"]: ev["t"] for ev in self.events if ev["kind"] == "kill"}
        out = {}
        for p, recs in per_proc:
            waiting = {}
            for r in recs:
                if r["op"] != "acquire":
                    continue
                name = r["name"]
                if r["phase"] == "invoke":
                    waiting.pop(name, None)
                    fields = r["detail"].split(",")
                    if "fair" not in fields:
                        continue
                    kv = dict(f.split("=", 1) for f in fields if "=" in f)
                    call = dict(name=name, who=p.who, pid=p.pid, index=p.index, t_inv=r["t"], t_end=None,
                                outcome="none", detail="", token=0, wait_ms=int(kv.get("wait") or 0))
                    waiting[name] = call
                    out.setdefault(name, []).append(call)
                elif name in waiting and r["phase"] in ("ok", "fail", "unknown"):
                    waiting.pop(name).update(t_end=r["t"], outcome=r["phase"], detail=r["detail"], token=r["token"])
            last = max((r["t"] for r in recs), default=0)
            for call in waiting.values():
                call["t_end"] = kills.get(p.pid, last)
                call["outcome"] = "killed" if p.pid in kills else "none"
        return out

    def check_fair(self, per_proc):
        """Fair leases (lease_options::fair, a ticket queue per name; worker --fair-pct). Exclusion and
        token uniqueness are the checks above (a fair hold is a critical section like any other). Here,
        per fair name:
        - fair_token_order: a grant acknowledged before another call even began has the smaller token.
        - fair_ticket_order: waiters are granted in the order they joined the queue. Waiter x joined
          before y when x invoked over FAIR_SAME_INSTANT_US before y (its ticket is taken by its first
          poll, right after the invoke; closer than that the two may have either order). When y is
          granted (its ok) while such an x is still waiting (x's outcome comes later: x was waiting
          from before y joined until after the grant, which lies between y's invoke and y's ok), the
          queue put y before x: a violation, unless x's ticket may have died meanwhile: a ticket
          lives fair_ticket_ttl (2 s) past the waiter's last poll, so a waiter whose polls could not
          get through (any fault on its process, a server restart or crash, a database write stall
          in the window) or whose wait ended in an error rather than a grant or a timeout is excused
          (a dead waiter), counted as fair_pairs_excused. fair_pairs_in_order counts the pairs the
          queue kept in order (x joined over FAIR_SAME_INSTANT_US before y, y joined while x waited,
          x was granted while y still waited): the material the rule had.
        - fair_wait_exceeded: a call returned later than its wait bound + FAIR_WAIT_MARGIN_US, with no
          fault on its process, restart or write stall to explain it."""
        calls = self.fair_calls(per_proc)
        self.hist.update(fair_calls=0, fair_grants=0, fair_pairs_in_order=0, fair_pairs_excused=0, fair_ticket_order=0,
                         fair_token_order=0, fair_wait_exceeded=0)
        for name, lst in calls.items():
            self.hist["fair_calls"] += len(lst)
            grants = sorted((c for c in lst if c["outcome"] == "ok"), key=lambda c: c["t_end"])
            self.hist["fair_grants"] += len(grants)
            for c in lst:
                took = c["t_end"] - c["t_inv"]
                if c["outcome"] in ("ok", "fail") and c["wait_ms"] and took > c["wait_ms"] * 1000 + FAIR_WAIT_MARGIN_US \
                        and not self.touched(c["pid"], c["t_inv"], c["t_end"]) and not self.stalled(c["t_inv"], c["t_end"]):
                    self.hist["fair_wait_exceeded"] += 1
                    self.v.add("fair_wait_exceeded", f"{name}: worker {c['index']}'s fair acquire with a wait bound of "
                                                     f"{c['wait_ms']} ms returned ({c['outcome']} {c['detail']}) after "
                                                     f"{took / 1000:.0f} ms")
            # Token order: the largest token granted before y began must be below y's.
            best = None
            i = 0
            for y in sorted(grants, key=lambda c: c["t_inv"]):
                while i < len(grants) and grants[i]["t_end"] < y["t_inv"]:
                    if best is None or grants[i]["token"] > best["token"]:
                        best = grants[i]
                    i += 1
                if best is not None and best["token"] >= y["token"]:
                    self.hist["fair_token_order"] += 1
                    self.v.add("fair_token_order", f"{name}: worker {best['index']} was granted token {best['token']} "
                                                   f"before worker {y['index']} asked, which then got token {y['token']}:" +
                               self.fair_window(per_proc, name, best, y))
            # Ticket order.
            by_join = sorted(lst, key=lambda c: c["t_inv"])
            for y in grants:
                for x in by_join:
                    if x["t_inv"] + FAIR_SAME_INSTANT_US >= y["t_inv"]:
                        break
                    if x["who"] == y["who"]:
                        continue
                    if x["t_end"] <= y["t_end"]:
                        if x["outcome"] == "ok" and x["t_end"] > y["t_inv"]:
                            self.hist["fair_pairs_in_order"] += 1
                        continue
                    clean_end = x["outcome"] in ("ok", "killed") or (x["outcome"] == "fail" and x["detail"] == "timeout")
                    if not clean_end or self.touched(x["pid"], x["t_inv"], y["t_end"]) or \
                            self.stalled(x["t_inv"], y["t_end"]):
                        self.hist["fair_pairs_excused"] += 1
                        continue
                    self.hist["fair_ticket_order"] += 1
                    then = {"ok": f"granted token {x['token']}", "killed": "killed"}.get(x["outcome"], "timed out")
                    self.v.add("fair_ticket_order",
                               f"{name}: worker {x['index']} joined the queue {(y['t_inv'] - x['t_inv']) / 1000:.3f} ms "
                               f"before worker {y['index']} and still waited (it was {then} "
                               f"{(x['t_end'] - y['t_end']) / 1000:.3f} ms later) when worker {y['index']} was granted "
                               f"token {y['token']}, with no fault, restart or write stall that could have let its "
                               "ticket expire:" + self.fair_window(per_proc, name, x, y))

    def fair_window(self, per_proc, name, x, y, limit=14):
        """Both calls' records of `name` from the earlier invoke to the later end, merged in time
        order, printable (times relative to the earlier invoke)."""
        t0, t1 = min(x["t_inv"], y["t_inv"]), max(x["t_end"], y["t_end"])
        recs = sorted((r for p, rs in per_proc if p.who in (x["who"], y["who"]) for r in rs
                       if r["name"] == name and t0 <= r["t"] <= t1), key=lambda r: r["t"])
        lines = [f"      {(r['t'] - t0) / 1000:+11.3f} ms  worker {r['index']:>4} pid {r['pid']:>7}: "
                 f"{r['phase']:<7} {r['op']:<13} token {r['token']} {r['detail']}" for r in recs]
        if len(lines) > limit:
            lines = lines[:limit // 2] + [f"      ... {len(lines) - limit} more ..."] + lines[-limit // 2:]
        return "\n" + "\n".join(lines)

    def stalled(self, t0, t1):
        """True when the database took no writes for over 500 ms somewhere in [t0, t1] (T records)."""
        return any(a < t1 and b > t0 for a, b in getattr(self, "stalls", ()))

    def touched_safe(self, pid, t0, t1):
        return self.touched(pid, t0, t1)

    @staticmethod
    def simple_window(recs, t0, t1, name, limit=14):
        """One worker's records of `name` from t0 to t1, printable (times relative to t0)."""
        lines = [f"      {(r['t'] - t0) / 1000:+11.3f} ms  pid {r['pid']:>7}: {r['phase']:<7} {r['op']:<13} "
                 f"token {r['token']} {r['detail']}" for r in recs if t0 <= r["t"] <= t1 and r["name"] == name]
        if len(lines) > limit:
            lines = lines[:limit // 2] + [f"      ... {len(lines) - limit} more ..."] + lines[-limit // 2:]
        return "\n" + "\n".join(lines)

    def check_semaphores(self, per_proc, css, stops):
        """--permits N: every critical section is named <semaphore>#<slot>, so the checks above prove
        per-slot exclusion and per-slot token order. Here, per semaphore: the slot is in 0..N-1, and
        never more than N critical sections of different workers overlap (a holder frozen by SIGSTOP
        across another's acquisition is not counted, as above); catches a library that hands out
        more permits than N under slot numbers that look right."""
        n_permits = self.permits
        self.hist.update(slot_out_of_range=0, semaphore_over_capacity=0, max_inside=0, capacity_excused_paused=0)
        by_sem = {}
        for cs in css:
            sem, hash_, slot = cs["name"].rpartition("#")
            if not hash_ or not slot.isdigit() or int(slot) >= n_permits:
                self.hist["slot_out_of_range"] += 1
                self.v.add("permit_slot_out_of_range", f"{cs['name']}: worker {cs['index']} token {cs['token']} "
                                                       f"holds a permit outside slots 0..{n_permits - 1}")
            by_sem.setdefault(sem if hash_ else cs["name"], []).append(cs)
        for sem, lst in by_sem.items():
            lst.sort(key=lambda c: c["s"])
            active = []
            for y in lst:
                active = [x for x in active if x["e"] > y["s"]]
                inside = []
                for x in active:
                    if x["who"] == y["who"]:
                        continue
                    if any(ev["pid"] == x["pid"] and ev["t"] <= y["s"] and (ev["t_end"] or y["s"]) >= x["s"]
                           for ev in stops):
                        self.hist["capacity_excused_paused"] += 1
                        continue
                    inside.append(x)
                self.hist["max_inside"] = max(self.hist["max_inside"], len(inside) + 1)
                if len(inside) + 1 > n_permits:
                    self.hist["semaphore_over_capacity"] += 1
                    lines = [f"      worker {x['index']:>4} pid {x['pid']:>7} {x['name']} token {x['token']}: "
                             f"from {(x['s'] - y['s']) / 1000:+.3f} ms to {(x['e'] - y['s']) / 1000:+.3f} ms "
                             f"({x['how']})" for x in inside + [y]]
                    self.v.add("semaphore_over_capacity",
                               f"{sem}: {len(inside) + 1} critical sections inside at once with {n_permits} permits "
                               f"(times relative to worker {y['index']}'s acquisition):\n" + "\n".join(lines))
                active.append(y)

    def check_guarded_writes(self, per_proc):
        """A write made in a guarded transaction (require_lease) commits only while its lease is held:
        no acquisition of the name with a larger token may have been acknowledged before the write
        even began. Not excused by pauses: a frozen holder's guarded write must be refused."""
        acks = {}
        for _, recs in per_proc:
            for r in recs:
                if r["op"] == "acquire" and r["phase"] == "ok":
                    acks.setdefault(r["name"], []).append(r)
        for _, recs in per_proc:
            pending = None
            for r in recs:
                if r["op"] != "write":
                    continue
                if r["phase"] == "invoke":
                    pending = r if r["detail"].endswith(":guarded") else None
                    continue
                if pending is None or r["phase"] != "ok" or r["detail"] != "applied":
                    pending = None
                    continue
                w, pending = pending, None
                self.hist["guarded_writes"] += 1
                later = [a for a in acks.get(w["name"], []) if a["token"] > w["token"] and a["t"] < w["t"]]
                if later:
                    a = min(later, key=lambda x: x["t"])
                    self.hist["stale_guarded_write"] += 1
                    self.v.add("stale_guarded_write",
                               f"{w['name']}: worker {w['index']} committed a guarded write with token {w['token']} "
                               f"begun {(w['t'] - a['t']) / 1000:.3f} ms after worker {a['index']} was acknowledged "
                               f"token {a['token']}")


    def touched(self, pid, t0, t1):
        """True when any fault that can cost a lease hit this process (or the server) in [t0, t1]."""
        for ev in self.events:
            if ev.get("pid") == pid and ev["t"] <= t1 and (ev.get("t_end") or ev["t"]) >= t0:
                return True
        return self.restart_between(t0, t1)

    def restart_between(self, t0, t1):
        margin = 5_000_000
        return any(r[0] <= t1 and (r[1] or t1) + margin >= t0 for r in self.restarts)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check a fault-harness history file (see the module doc).")
    ap.add_argument("history")
    ap.add_argument("--print-max", type=int, default=5, help="violations printed per kind")
    ap.add_argument("--json", action="store_true", help="print {counts, violations} as JSON instead")
    o = ap.parse_args(argv)
    try:
        c = Checker(*read_history(o.history))
    except (OSError, ValueError, SyntaxError) as e:
        print(f"check_history: {e}", file=sys.stderr)
        return 2
    c.check()
    if o.json:
        json.dump(dict(counts=c.hist, violations=c.v.items), sys.stdout)
        print()
        return 0 if c.v.count() == 0 else 1
    printed = {}
    for kind, detail in c.v.items:
        printed[kind] = printed.get(kind, 0) + 1
        if printed[kind] <= o.print_max:
            print(f"VIOLATION {kind}: {detail}")
    for kind, n in printed.items():
        if n > o.print_max:
            print(f"VIOLATION {kind}: ... {n - o.print_max} more not printed")
    print(f"history[{','.join(f'{k}={v}' for k, v in c.hist.items())}] violations={c.v.count()}")
    return 0 if c.v.count() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
