#!/usr/bin/env python3
"""Unit tests of the fault harness's checkers on synthetic histories (no database, no workers):
each rule is shown firing on a history that breaks it and staying quiet on the ones it must accept.
check_history.py's fair-lease rules (check_fair), and fault_driver.py's stuck_after_holder_died rule
with the window it judges (a waiter's timeout proves the name stuck only after the killed holder's
lease had certainly expired and before anybody may have held the name again; on a fair name, also
after the tickets of faulted waiters could have expired) and its stopped-holder rules, on plain,
fair (FairHolderFaults) and reader-writer write holds (RwWriterFaults). ctest fault_check_history;
by hand: tests/fault/test_check_history.py [-v]."""
import argparse
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import check_history  # noqa: E402
import fault_driver  # noqa: E402

MS = 1000  # history times are microseconds
T0 = 10_000_000 * MS  # an arbitrary CLOCK_MONOTONIC origin


class History:
    """A synthetic history: lock loops and their O records, times in ms from T0."""

    def __init__(self):
        self.per_proc = []
        self.events = []
        self.restarts = []
        self.stalls = []

    def loop(self, pid, index=None, k=0):
        p = check_history.Loop(pid, k, index if index is not None else pid, "", 1)
        self.per_proc.append((p, []))
        return p

    def op(self, p, t_ms, phase, op, name, token=0, detail=""):
        recs = next(r for q, r in self.per_proc if q is p)
        recs.append(check_history.op_record(["O", str(T0 + t_ms * MS), phase, op, name, str(token), detail], p))

    def fair_call(self, p, name, t_inv, t_end, outcome="ok", token=0, hold_ms=100, wait_ms=3000):
        """A fair acquire call as fault_worker's run_fair logs it (and its hold, when granted)."""
        self.op(p, t_inv, "invoke", "acquire", name, 0, f"ttl=2000,fair,wait={wait_ms},ticket_ttl=2000")
        if outcome == "ok":
            self.op(p, t_end, "ok", "acquire", name, token, "fair")
            self.op(p, t_end + hold_ms, "invoke", "release", name, token, "fair")
            self.op(p, t_end + hold_ms + 1, "ok", "release", name, token, "fair")
        elif outcome == "timeout":
            self.op(p, t_end, "fail", "acquire", name, 0, "timeout")
        else:
            self.op(p, t_end, "unknown", "acquire", name, 0, outcome)

    def check(self):
        c = check_history.Checker(self.per_proc, self.events, self.restarts, 0, self.stalls)
        c.check()
        return c


class FairLeaseRules(unittest.TestCase):
    def two_waiters(self, y_joins_at=1000):
        """x joins the queue at 0 and waits; y joins later and is granted at 1500 ms while x still
        waits (x is granted at 2000 ms): y overtook x."""
        h = History()
        x, y = h.loop(101), h.loop(102)
        h.fair_call(x, "f_fair0", 0, 2000, token=3)
        h.fair_call(y, "f_fair0", y_joins_at, 1500, token=2)
        return h, x, y

    def test_a_waiter_granted_before_one_that_joined_the_queue_earlier_is_flagged(self):
        h, _, _ = self.two_waiters()
        c = h.check()
        self.assertEqual(c.hist["fair_ticket_order"], 1, c.v.items)
        kind, detail = c.v.items[0]
        self.assertEqual(kind, "fair_ticket_order")
        self.assertIn("worker 101 joined the queue 1000.000 ms before worker 102 and still waited (it was granted "
                      "token 3 500.000 ms later) when worker 102 was granted token 2", detail)
        self.assertIn("invoke  acquire", detail)  # the window of history is printed

    def test_waiters_that_joined_within_the_same_instant_are_not_ordered(self):
        h, _, _ = self.two_waiters(y_joins_at=check_history.FAIR_SAME_INSTANT_US // MS - 1)
        c = h.check()
        self.assertEqual(c.v.count(), 0, c.v.items)

    def test_an_overtaken_waiter_whose_process_was_stopped_is_a_dead_waiter(self):
        h, x, _ = self.two_waiters()
        h.events.append(dict(kind="stop", t=T0 + 200 * MS, t_end=T0 + 1400 * MS, pid=x.pid, holding=None))
        c = h.check()
        self.assertEqual(c.v.count(), 0, c.v.items)
        self.assertEqual(c.hist["fair_pairs_excused"], 1)

    def test_an_overtaken_waiter_during_a_database_write_stall_is_a_dead_waiter(self):
        h, _, _ = self.two_waiters()
        h.stalls.append((T0 + 300 * MS, T0 + 900 * MS))
        self.assertEqual(h.check().v.count(), 0)

    def test_an_overtaken_waiter_whose_wait_ended_in_an_error_is_a_dead_waiter(self):
        h = History()
        x, y = h.loop(101), h.loop(102)
        h.fair_call(x, "f_fair0", 0, 2000, outcome="connection_lost")
        h.fair_call(y, "f_fair0", 1000, 1500, token=2)
        c = h.check()
        self.assertEqual(c.v.count(), 0, c.v.items)
        self.assertEqual(c.hist["fair_pairs_excused"], 1)

    def test_an_overtaken_waiter_that_later_timed_out_is_flagged(self):
        h = History()
        x, y = h.loop(101), h.loop(102)
        h.fair_call(x, "f_fair0", 0, 3000, outcome="timeout")
        h.fair_call(y, "f_fair0", 1000, 1500, token=2)
        self.assertEqual(h.check().hist["fair_ticket_order"], 1)

    def test_a_waiter_that_gave_up_before_the_grant_is_not_judged(self):
        h = History()
        x, y = h.loop(101), h.loop(102)
        h.fair_call(x, "f_fair0", 0, 1200, outcome="timeout", wait_ms=1200)
        h.fair_call(y, "f_fair0", 1000, 1500, token=2)
        self.assertEqual(h.check().v.count(), 0)

    def test_grants_in_queue_order_pass_and_are_counted(self):
        h = History()
        x, y, z = h.loop(101), h.loop(102), h.loop(103)
        h.fair_call(z, "f_fair0", 0, 1, token=1, hold_ms=1400)
        h.fair_call(x, "f_fair0", 100, 1402, token=2, hold_ms=300)
        h.fair_call(y, "f_fair0", 1000, 1704, token=3)
        c = h.check()
        self.assertEqual(c.v.count(), 0, c.v.items)
        self.assertEqual(c.hist["fair_pairs_in_order"], 1)  # x before y (z's grant came before anyone waited)
        self.assertEqual(c.hist["fair_grants"], 3)

    def test_plain_acquisitions_are_not_held_to_ticket_order(self):
        h = History()
        x, y = h.loop(101), h.loop(102)
        h.op(x, 0, "invoke", "acquire", "f_lock0", 0, "ttl=2000")
        h.op(y, 1000, "invoke", "acquire", "f_lock0", 0, "ttl=2000")
        h.op(y, 1500, "ok", "acquire", "f_lock0", 2, "hold=1")
        h.op(y, 1600, "invoke", "release", "f_lock0", 2, "")
        h.op(x, 2000, "ok", "acquire", "f_lock0", 3, "hold=1")
        self.assertEqual(h.check().v.count(), 0)

    def test_a_smaller_token_after_a_grant_that_came_before_the_call_began_is_flagged(self):
        h = History()
        x, y = h.loop(101), h.loop(102)
        h.fair_call(x, "f_fair0", 0, 10, token=5)
        h.fair_call(y, "f_fair0", 300, 310, token=4)
        c = h.check()
        self.assertEqual(c.hist["fair_token_order"], 1, c.v.items)
        self.assertEqual(c.v.items[0][0], "fair_token_order")

    def test_a_fair_call_past_its_wait_bound_is_flagged_unless_a_restart_explains_it(self):
        h = History()
        x = h.loop(101)
        h.fair_call(x, "f_fair0", 0, 5500, outcome="timeout")
        c = h.check()
        self.assertEqual(c.hist["fair_wait_exceeded"], 1, c.v.items)
        h.restarts.append((T0 + 1000 * MS, T0 + 2000 * MS))
        self.assertEqual(h.check().v.count(), 0)

    def test_the_history_file_carries_the_write_stalls(self):
        h, _, _ = self.two_waiters()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "history.txt")
            with contextlib.redirect_stdout(io.StringIO()):
                check_history.write_history(path, h.per_proc, [], [], 0, [(T0 + 300 * MS, T0 + 900 * MS)])
                self.assertEqual(check_history.main([path, "--json"]), 0)
                check_history.write_history(path, h.per_proc, [], [], 0, [])
                self.assertEqual(check_history.main([path, "--json"]), 1)


class ReaderWriterTokens(unittest.TestCase):
    """A reader-writer lease has one fencing sequence per name, readers included (issue 16)."""

    @staticmethod
    def hold(h, p, name, t_inv, t_ok, token, mode, hold_ms=50):
        h.op(p, t_inv, "invoke", "acquire", name, 0, f"ttl=2000,{mode}")
        h.op(p, t_ok, "ok", "acquire", name, token, mode)
        h.op(p, t_ok + hold_ms, "invoke", "release", name, token, mode)
        h.op(p, t_ok + hold_ms + 1, "ok", "release", name, token, mode)

    def test_a_reader_then_a_writer_with_the_same_token_is_flagged(self):
        # Seen on SQLite before the fix: a reader got token 1, a later writer token 1 too.
        h = History()
        x, y = h.loop(101), h.loop(102)
        self.hold(h, x, "f_rw0", 0, 5, 1, "read")
        self.hold(h, y, "f_rw0", 200, 205, 1, "write")
        c = h.check()
        self.assertEqual(sorted(k for k, _ in c.v.items), ["rw_token_order", "token_reused"], c.v.items)

    def test_a_new_readers_smaller_token_after_a_writer_is_flagged(self):
        h = History()
        x, y, z = h.loop(101), h.loop(102), h.loop(103)
        self.hold(h, x, "f_rw0", 0, 5, 1, "read")
        self.hold(h, y, "f_rw0", 100, 105, 2, "write")
        self.hold(h, z, "f_rw0", 300, 305, 1, "read")  # a new client's reader row starts at 1 again
        c = h.check()
        self.assertEqual(c.hist["rw_token_order"], 1, c.v.items)
        self.assertEqual(c.hist["token_reused"], 1, c.v.items)

    def test_readers_acquired_concurrently_may_be_granted_in_either_order(self):
        h = History()
        x, y, z = h.loop(101), h.loop(102), h.loop(103)
        self.hold(h, x, "f_rw0", 0, 30, 5, "read", hold_ms=200)
        self.hold(h, y, "f_rw0", 10, 20, 6, "read", hold_ms=200)  # invoked before x's ok: unordered
        self.hold(h, z, "f_rw0", 400, 405, 7, "write")
        c = h.check()
        self.assertEqual(c.v.count(), 0, c.v.items)
        self.assertEqual(c.hist["rw_read_overlaps"], 1)

    def test_plain_names_are_not_held_to_it(self):
        h = History()
        x, y = h.loop(101), h.loop(102)
        self.hold(h, x, "f_lock0", 0, 5, 4, "hold=1")
        self.hold(h, y, "f_lock0", 200, 205, 3, "hold=1")
        self.assertEqual(h.check().hist["rw_token_order"], 0)


class CriticalSections(unittest.TestCase):
    def test_a_lease_reported_lost_before_its_acquire_returned_holds_nothing(self):
        # Seen in a PostgreSQL run: the acquire's answer came 5.5 s late, on_lost had fired inside
        # the call (the lease had run out by the client's clock), and another worker took the name
        # 340 ms after the call returned; the flag was noticed 3.6 s later.
        def history(early_loss):
            h = History()
            x, y = h.loop(101), h.loop(102)
            h.op(x, 0, "invoke", "acquire", "f_lock0", 0, "ttl=3293")
            if early_loss:
                h.op(x, 5000, "lost", "outer", "f_lock0", 15, "callback")
            h.op(x, 5001, "ok", "acquire", "f_lock0", 15, "hold=1")
            h.op(y, 100, "invoke", "acquire", "f_lock0", 0, "ttl=2000")
            h.op(y, 5340, "ok", "acquire", "f_lock0", 16, "hold=1")
            h.op(x, 8600, "lost", "outer", "f_lock0", 15, "flag")
            return h.check()
        self.assertEqual(history(early_loss=True).v.count(), 0)
        c = history(early_loss=False)
        self.assertEqual([k for k, _ in c.v.items], ["late_loss_report"], c.v.items)

    def test_a_lease_lost_before_its_acquire_returned_overlaps_nothing_it_returned_inside(self):
        # Seen in CI's PostgreSQL run (seed 551314802): an acquire with a 227 ms TTL ran 4.7 s; its
        # lease (token 28) was reported lost 127 ms before another worker acquired token 29, and the
        # call returned 21 ms after that, inside the other's hold. It held nothing: no overlap.
        def history(early_loss):
            h = History()
            x, y = h.loop(90), h.loop(92)
            h.op(y, 0, "invoke", "acquire", "f_lock2", 0, "ttl=227")
            if early_loss:
                h.op(y, 4576, "lost", "outer", "f_lock2", 28, "callback")
            h.op(x, 4700, "invoke", "acquire", "f_lock2", 0, "ttl=2000")
            h.op(x, 4703, "ok", "acquire", "f_lock2", 29, "multi")
            h.op(y, 4724, "ok", "acquire", "f_lock2", 28, "hold=1")
            h.op(y, 4767, "invoke", "release", "f_lock2", 28, "race")
            h.op(y, 4768, "fail", "release", "f_lock2", 28, "lease_lost")
            h.op(x, 6500, "invoke", "release", "f_lock2", 29)
            h.op(x, 6501, "ok", "release", "f_lock2", 29)
            return h.check()
        c = history(early_loss=True)
        self.assertEqual(c.v.count(), 0, c.v.items)
        c = history(early_loss=False)
        self.assertIn("overlap", [k for k, _ in c.v.items], c.v.items)


class FakeProc:
    def __init__(self, pid, index, log_path):
        self.pid, self.index, self.log_path = pid, index, log_path
        self.threads, self.skew, self.holder_label = 1, None, None


class DriverHistoryCase(unittest.TestCase):
    """Worker logs written to a temporary folder, judged by fault_driver.Driver.check_lock_phase."""


    name = "f_lock0"
    ticket = ""  # the invoke detail's fair fields (FairHolderFaults: ",fair,wait=3000,ticket_ttl=2000")

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.logs = {}
        self.lock_row_token = 7

    def tearDown(self):
        self.dir.cleanup()

    def log(self, pid, *lines):
        self.logs.setdefault(pid, [f"P\t{pid}\t{T0}\t{pid}\t\t0"]).extend(lines)

    def o_line(self, pid, t_ms, phase, op, token=0, detail="", name=None):
        if phase == "invoke" and op == "acquire" and detail.startswith("ttl="):
            detail += self.ticket
        self.log(pid, f"O\t{T0 + t_ms * MS}\t{phase}\t{op}\t{name or self.name}\t{token}\t{detail}")

    def base_history(self, timeout_at_ms=6000):
        self.o_line(101, 1000, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(101, 1010, "ok", "acquire", 5, "hold=1")
        self.log(101, f"A\t{self.name}\t5\th101\t{T0 + 1000 * MS}\t{T0 + 1010 * MS}")
        self.o_line(102, 3000, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(102, timeout_at_ms, "fail", "acquire", 0, "timeout")
        self.log(102, f"N\t{self.name}\t{T0 + 3000 * MS}\t{T0 + timeout_at_ms * MS}")
        self.o_line(103, 6500, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(103, 6600, "ok", "acquire", 7, "hold=1")
        self.log(103, f"A\t{self.name}\t7\th103\t{T0 + 6500 * MS}\t{T0 + 6600 * MS}")
        self.o_line(103, 6700, "invoke", "release", 7)
        self.o_line(103, 6710, "ok", "release", 7)
        self.log(103, f"R\t{self.name}\t7\t{T0 + 6700 * MS}\t{T0 + 6710 * MS}\tok\t0\t0")

    def run_driver_check(self, probe_lines=(), events=None, aw=(), lock=None):
        procs = []
        for pid, lines in sorted(self.logs.items()):
            path = os.path.join(self.dir.name, f"lock_{pid:05d}.log")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            procs.append(FakeProc(pid, pid, path))
        probe_path = os.path.join(self.dir.name, "probe.log")
        with open(probe_path, "w") as f:
            f.write("".join(line + "\n" for line in probe_lines))
        d = fault_driver.Driver.__new__(fault_driver.Driver)
        d.o = argparse.Namespace(ttl_ms=2000, wait_ms=3000, duration=60)
        d.v = check_history.Violations()
        d.notes = []
        d.restarts = []
        d.events = events if events is not None else [dict(kind="kill", t=T0 + 2000 * MS, pid=101,
                                                            holding=(self.name, 5))]
        d.lock_procs_all = procs
        d.probe = FakeProc(-1, -1, probe_path)
        res = {self.name: (aw[-1][4], aw[-1][2], aw[-1][3])} if aw else {}
        lock = dict(lock or {}, **{self.name: (self.lock_row_token, "h")})
        db = dict(res=res, aw=list(aw), lock=lock, stock={}, sales={}, integrity=[])
        d.check_lock_phase(db, [])
        return d

    def kinds(self, d):
        return [k for k, _ in d.v.items]

    def stopped_holder_history(self, release_result, renew_result=None, stale_write=None):
        # Holder 101 (TTL 2 s) acquires token 5 at 1.0 s and is SIGSTOPped from 1.5 s to 6.0 s;
        # 103 takes the name over (token 7) at 4.5 s and writes (applied); after the resume 101
        # writes (stale_write: "1" applied, "0" rejected), renews (renew_result, guard lost unless
        # it passed) and releases.
        self.o_line(101, 1000, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(101, 1010, "ok", "acquire", 5, "hold=1")
        self.log(101, f"A\t{self.name}\t5\th101\t{T0 + 1000 * MS}\t{T0 + 1010 * MS}")
        if stale_write is not None:
            self.log(101, f"W\t{self.name}\t5\th101\t{T0 + 6010 * MS}\t{T0 + 6020 * MS}\t{stale_write}\t0\t11")
        if renew_result is not None:
            lost = "0" if renew_result == "ok" else "1"
            self.log(101, f"U\t{self.name}\t5\t{T0 + 6050 * MS}\t{T0 + 6060 * MS}\t{renew_result}\t{lost}")
        self.o_line(101, 6100, "invoke", "release", 5)
        self.o_line(101, 6350, "fail" if release_result != "ok" else "ok", "release", 5, release_result)
        self.log(101, f"R\t{self.name}\t5\t{T0 + 6100 * MS}\t{T0 + 6350 * MS}\t{release_result}\t1\t1")
        self.o_line(103, 4400, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(103, 4500, "ok", "acquire", 7, "hold=1")
        self.log(103, f"A\t{self.name}\t7\th103\t{T0 + 4400 * MS}\t{T0 + 4500 * MS}")
        if stale_write is not None:
            self.log(103, f"W\t{self.name}\t7\th103\t{T0 + 4520 * MS}\t{T0 + 4530 * MS}\t1\t0\t31")
        self.o_line(103, 4600, "invoke", "release", 7)
        self.o_line(103, 4610, "ok", "release", 7)
        self.log(103, f"R\t{self.name}\t7\t{T0 + 4600 * MS}\t{T0 + 4610 * MS}\tok\t0\t0")
        aw = [(1, self.name, 7, "h103", 31)] + ([(2, self.name, 5, "h101", 11)] if stale_write == "1" else [])
        return self.run_driver_check(events=[dict(kind="stop", t=T0 + 1500 * MS, pid=101, holding=(self.name, 5),
                                                  t_end=T0 + 6000 * MS)], aw=aw)


class StuckAfterHolderDied(DriverHistoryCase):
    """fault_driver.py's stuck_after_holder_died: holder pid 101 (TTL 2 s) acquires lock0 at 1.0 s
    and is SIGKILLed at 2.0 s, so its lease has certainly expired by 4.0 s; waiter pid 102 waits
    from 3.0 s and times out at 6.0 s; pid 103 acquires the name at 6.6 s."""

    def test_a_stopped_holders_release_that_could_not_run_in_its_bound_proves_nothing(self):
        # CI's SQLite run (seed 2425870918): the release after the resume met SQLite's write lock
        # busy past its 250 ms bound (lock_not_available; the engine re-sends it in the background).
        self.lock_row_token = 7
        d = self.stopped_holder_history("lock_not_available")
        self.assertNotIn("stopped_holder_released", self.kinds(d), d.v.items)
        self.assertEqual(d.stop_outcomes["unanswered"], 1)

    def test_a_stopped_holders_renew_that_could_not_run_in_its_bound_proves_nothing(self):
        self.lock_row_token = 7
        d = self.stopped_holder_history("lease_lost", renew_result="lock_not_available")
        self.assertEqual(self.kinds(d), [], d.v.items)
        self.assertEqual(d.stop_outcomes["unanswered"], 1)
        self.assertEqual(d.stop_outcomes["release_refused"], 1)
        self.assertEqual(d.stop_outcomes["guard_lost"], 1)

    def test_a_stopped_holders_renew_that_passed_its_owner_check_is_flagged(self):
        self.lock_row_token = 7
        d = self.stopped_holder_history("lease_lost", renew_result="ok")
        self.assertIn("stopped_holder_renewed", self.kinds(d), d.v.items)

    def test_a_stopped_holders_release_that_passed_its_owner_check_is_flagged(self):
        self.lock_row_token = 7
        self.assertIn("stopped_holder_released", self.kinds(self.stopped_holder_history("ok")))

    def test_a_waiter_timing_out_after_the_dead_lease_expired_with_nobody_acquiring_is_flagged(self):
        self.base_history()
        d = self.run_driver_check()
        self.assertEqual(self.kinds(d), ["stuck_after_holder_died"], d.v.items)
        self.assertIn("timed out 2000 ms after the killed holder's lease (token 5) had certainly expired",
                      d.v.items[0][1])

    def test_a_timeout_soon_after_the_expiry_is_not_judged(self):
        self.base_history(timeout_at_ms=4700)  # within 750 ms of the expiry (a poll interval)
        self.assertEqual(self.kinds(self.run_driver_check()), [])

    def test_a_partial_hold_of_a_multi_lock_ends_the_window(self):
        self.base_history()
        self.o_line(104, 4400, "invoke", "acquire", 0, "ttl=2000,multi=f_lock0+f_lock1")
        self.o_line(104, 4500, "ok", "acquire", 6, "multi_partial")
        self.o_line(104, 5900, "invoke", "release", 6, "multi_partial")
        self.o_line(104, 5901, "ok", "release", 6, "multi_partial")
        self.assertEqual(self.kinds(self.run_driver_check()), [])

    def test_an_acquisition_whose_answer_was_lost_ends_the_window_at_its_invoke(self):
        self.base_history()
        self.o_line(104, 4200, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(104, 4300, "unknown", "acquire", 0, "connection_lost")
        self.assertEqual(self.kinds(self.run_driver_check()), [])

    def test_an_acknowledged_acquisition_before_the_timeout_ends_the_window(self):
        self.base_history()
        self.o_line(104, 4100, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(104, 4200, "ok", "acquire", 6, "hold=1")
        self.log(104, f"A\t{self.name}\t6\th104\t{T0 + 4100 * MS}\t{T0 + 4200 * MS}")
        self.o_line(104, 4300, "invoke", "release", 6)
        self.o_line(104, 4310, "ok", "release", 6)
        self.log(104, f"R\t{self.name}\t6\t{T0 + 4300 * MS}\t{T0 + 4310 * MS}\tok\t0\t0")
        self.assertEqual(self.kinds(self.run_driver_check()), [])

    def test_a_database_write_stall_in_the_window_excuses_the_timeout(self):
        self.base_history()
        # The probe's writes succeed every 50 ms except from 4.2 s to 5.5 s.
        probe = [f"H\t{T0 + t * MS}\t{T0 + (t + 5) * MS}\tok" for t in range(0, 8000, 50) if not 4200 < t < 5500]
        d = self.run_driver_check(probe)
        self.assertEqual(self.kinds(d), [])
        self.assertEqual(d.excused_by_stall, 1)

    def test_a_stopped_holder_refused_everything_is_counted(self):
        d = self.stopped_holder_history("lease_lost", renew_result="lease_lost", stale_write="0")
        self.assertEqual(self.kinds(d), [], d.v.items)
        self.assertEqual({k: d.stop_outcomes[k] for k in ("taken_over", "write_rejected", "renew_refused",
                                                          "release_refused", "guard_lost")},
                         dict(taken_over=1, write_rejected=1, renew_refused=1, release_refused=1, guard_lost=1))

    def test_a_stopped_holders_write_applied_after_the_new_holders_is_flagged(self):
        d = self.stopped_holder_history("lease_lost", renew_result="lease_lost", stale_write="1")
        self.assertEqual(sorted(self.kinds(d)), ["applied_out_of_order", "stale_write_applied"], d.v.items)

    def test_another_process_stopped_in_the_window(self):
        # Pid 104 (a waiter, say) is SIGSTOPped at 3.8 s. A plain name has no queue: the waiter's
        # timeout at 6.0 s is judged as ever. A fair name goes to the lowest live ticket, and 104's
        # may live until 5.8 s (FAIR_TICKET_TTL_US after its last poll): not judged before 6.55 s.
        self.base_history()
        kill = dict(kind="kill", t=T0 + 2000 * MS, pid=101, holding=(self.name, 5))
        stop = dict(kind="stop", t=T0 + 3800 * MS, pid=104, holding=None, t_end=T0 + 9000 * MS)
        d = self.run_driver_check(events=[kill, stop])
        self.assertEqual(self.kinds(d), [] if self.ticket else ["stuck_after_holder_died"], d.v.items)


class FairHolderFaults(StuckAfterHolderDied):
    """The same histories on the fair shape's name (fault_worker --fair-pct: A, W, U, R lines like
    a plain hold, the invoke carrying fair,wait=,ticket_ttl=): a killed or stopped fair holder is
    judged by the same rules, except that a fair name's queue may wait for a dead waiter's ticket
    (test_another_process_stopped_in_the_window)."""
    name = "f_fair0"
    ticket = ",fair,wait=3000,ticket_ttl=2000"
    # A multi-lock never takes a fair name (fault_worker: the fair name is acquired only fairly).
    test_a_partial_hold_of_a_multi_lock_ends_the_window = None

    def test_a_waiter_timing_out_past_a_stopped_waiters_ticket_is_flagged(self):
        self.base_history(timeout_at_ms=6600)  # 104's ticket expired at 5.8 s; 103 acquires at 6.6 s
        self.logs[103] = self.logs[103][:1]  # nobody acquires
        kill = dict(kind="kill", t=T0 + 2000 * MS, pid=101, holding=(self.name, 5))
        stop = dict(kind="stop", t=T0 + 3800 * MS, pid=104, holding=None, t_end=T0 + 9000 * MS)
        d = self.run_driver_check(events=[kill, stop])
        self.assertEqual(self.kinds(d), ["stuck_after_holder_died"], d.v.items)

    def test_the_fair_holds_are_fair_calls_of_the_history_checker(self):
        # The history of a fair hold as the worker now logs it (ok detail hold=1,fair) is still a fair
        # call for check_fair: y granted while x, who joined 1 s earlier, still waits, is flagged.
        h = History()
        x, y = h.loop(101), h.loop(102)
        for p, t_inv, t_ok, tok in ((x, 0, 2000, 3), (y, 1000, 1500, 2)):
            h.op(p, t_inv, "invoke", "acquire", self.name, 0, "ttl=2000" + self.ticket)
            h.op(p, t_ok, "ok", "acquire", self.name, tok, "hold=1,fair")
            h.op(p, t_ok + 100, "invoke", "release", self.name, tok, "")
            h.op(p, t_ok + 101, "ok", "release", self.name, tok, "")
        c = h.check()
        self.assertIn("fair_ticket_order", [k for k, _ in c.v.items], c.v.items)


class RwWriterFaults(DriverHistoryCase):
    """A reader-writer name's write holds log A lines (fault_worker --rw-pct), its read holds do not:
    the stopped-holder rules apply to writers, but nothing proves the name stuck when no writer
    comes after a killed one (readers may hold it all along), and its rows are derived (no LOCK
    line in the dump, so no row-trace check)."""
    name = "f_rw0"
    ticket = ",write"

    def test_a_stopped_writers_release_that_passed_its_owner_check_is_flagged(self):
        self.lock_row_token = 0  # no LOCK line for a reader-writer name: not judged
        d = self.stopped_holder_history("ok", renew_result="lease_lost", stale_write="0")
        # (and no acquisition_without_row_trace although the "row" has token 0: not judged)
        self.assertEqual(self.kinds(d), ["release_after_takeover", "stopped_holder_released"], d.v.items)
        self.assertEqual(d.stop_outcomes["rw_taken_over"], 1)

    def killed_then_nobody(self, ok_detail, tried=True):
        """Holder 101 of self.name (token 5) is SIGKILLed at 2 s; nobody acquires the name again
        (though 103 tries it at 8 s, once it is free, unless not `tried`), while the phase goes on
        (another name acquired at 30 s)."""
        self.o_line(101, 1000, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(101, 1010, "ok", "acquire", 5, ok_detail)
        self.log(101, f"A\t{self.name}\t5\th101\t{T0 + 1000 * MS}\t{T0 + 1010 * MS}")
        if tried:
            self.o_line(103, 8000, "invoke", "acquire", 0, "ttl=2000")
        self.o_line(102, 30000, "invoke", "acquire", 0, "ttl=2000", name="f_lock1")
        self.o_line(102, 30010, "ok", "acquire", 9, "hold=1", name="f_lock1")
        self.log(102, f"A\tf_lock1\t9\th102\t{T0 + 30000 * MS}\t{T0 + 30010 * MS}")
        return self.run_driver_check(lock={"f_lock1": (9, "h102")})

    def test_no_writer_after_a_killed_writer_is_not_a_stuck_lock(self):
        d = self.killed_then_nobody("write")
        self.assertEqual(self.kinds(d), [], d.v.items)

    def test_nobody_after_a_killed_plain_holder_is_a_stuck_lock(self):
        self.name = "f_lock0"
        d = self.killed_then_nobody("hold=1")
        self.assertEqual(self.kinds(d), ["stuck_lock"], d.v.items)

    def test_a_name_nobody_tried_after_its_holder_was_killed_is_not_a_stuck_lock(self):
        # The workers pick names at random: nobody trying a name proves nothing about it (the
        # fresh process after the run checks that every name can be acquired).
        self.name = "f_lock0"
        d = self.killed_then_nobody("hold=1", tried=False)
        self.assertEqual(self.kinds(d), [], d.v.items)

class RwCrashRowChecks(unittest.TestCase):
    """crash_after_ack on reader-writer leases: an acknowledged read or write acquisition of
    <prefix>_rwN is a target, and its rows (writer, readers, fence) are judged after recovery."""

    NAME = "f_rw0"

    def rows(self, **by_kind):
        lo, _ = fault_driver.rw_rows_range(self.NAME)
        pad = lambda s: s + "." * max(0, 256 - len(s))  # noqa: E731
        names = {"writer": pad(lo + "writer"), "reader": pad(lo + "reader." + "ab" * 16 + "." + "0" * 20),
                 "reader2": pad(lo + "reader." + "cd" * 16 + "." + "0" * 20),
                 "fence": fault_driver.rw_fence_row(self.NAME)}
        return {names[k]: v for k, v in by_kind.items()}

    def judge(self, op, token, **rows):
        return fault_driver.judge_rw_rows(op, token, self.rows(**rows), fault_driver.rw_fence_row(self.NAME))

    def test_the_rows_range_holds_writer_readers_and_fence_only(self):
        lo, hi = fault_driver.rw_rows_range(self.NAME)
        for row in self.rows(writer=0, reader=0, fence=0):
            self.assertTrue(lo <= row < hi, row)
        self.assertFalse(lo <= fault_driver.rw_fence_row("f_rw01") < hi)

    def test_an_acknowledged_read_whose_row_survived_passes(self):
        self.assertEqual(self.judge("acquire", 7, reader=(7, True), writer=(5, False), fence=(7, False)), (True, None))

    def test_an_acknowledged_write_released_before_the_freeze_passes(self):
        self.assertEqual(self.judge("acquire", 7, writer=(7, False), fence=(7, False)), (True, None))

    def test_an_acknowledged_acquisition_lost_in_the_crash_is_a_violation(self):
        judged, violation = self.judge("acquire", 7, reader=(4, False), writer=(6, False), fence=(6, False))
        self.assertTrue(judged)
        self.assertEqual(violation[0], "acquisition_lost_in_crash")

    def test_an_acknowledged_release_still_held_is_a_violation(self):
        judged, violation = self.judge("release", 7, writer=(7, True), fence=(7, False))
        self.assertEqual((judged, violation[0]), (True, "release_lost_in_crash"))
        self.assertEqual(self.judge("release", 7, writer=(7, False), fence=(7, False)), (True, None))

    def test_a_later_acquisition_of_the_same_row_is_not_judged(self):
        self.assertEqual(self.judge("acquire", 7, reader=(8, True), fence=(8, False)), (False, None))
        self.assertEqual(self.judge("release", 7, reader=(8, True), fence=(8, False)), (False, None))

    def test_another_reader_since_does_not_hide_this_ones_row(self):
        self.assertEqual(self.judge("acquire", 7, reader=(7, True), reader2=(8, True), fence=(8, False)), (True, None))
        self.assertEqual(self.judge("release", 7, reader=(7, True), reader2=(8, True), fence=(8, False))[1][0],
                         "release_lost_in_crash")

    def test_rw_acknowledgments_are_crash_targets(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "w.log")
            with open(log, "w") as f:
                f.write(f"O\t{T0}\tok\tacquire\t{self.NAME}@1\t12\tread\n")
            p = fault_driver.Proc(0, 0, FakeProc(1, 0, log), log, None)
            p.poll_log()
            self.assertEqual((p.acks, p.last_ack), (1, ("acquire", self.NAME + "@1", 12, T0)))


if __name__ == "__main__":
    unittest.main()
