"""The stray sweep's termination rule (``sandbox/runner.py``: ``sweep_strays``, ``Supervisor.kill_strays``),
driven by a fake process table: no Docker, no real processes.

In a container a process that forks and exits in a loop can put its child out of a pass's reach:
the pass lists the parent, the parent forks and exits before it is looked at, the child is not in
the listing. The sweep must then go on until a pass finds no kill and no churn (issue 29 follow-up);
the local backend keeps its one rule (a pass without a kill ends the sweep)."""

from __future__ import annotations

from cooplab.sandbox import runner


class World:
    """A process table: pid -> "R" (running) or "Z" (zombie). ``after_listing[i]`` runs right after
    pass ``i`` took its listing of pids (the states are read as each pid is reached, as /proc is)."""

    def __init__(self, procs, after_listing=(), reaped=True):
        self.procs = dict(procs)
        self.after_listing = list(after_listing)
        self.reaped = reaped  # whether our reap() clears zombies (False: their parent never waits)
        self.passes = 0
        self.killed = []

    def pids(self):
        snapshot = sorted(self.procs)
        if self.passes < len(self.after_listing):
            self.after_listing[self.passes](self)
        self.passes += 1
        return snapshot

    def listing(self):
        for pid in self.pids():
            state = self.procs.get(pid)
            yield pid, "gone" if state is None else ("zombie" if state == "Z" else "stray")

    def kill(self, pid):
        if pid not in self.procs:
            return False
        self.killed.append(pid)
        self.procs[pid] = "Z"
        return True

    def reap(self):
        if self.reaped:
            self.procs = {p: s for p, s in self.procs.items() if s != "Z"}

    def running(self):
        return [p for p, s in self.procs.items() if s == "R"]


def fork_and_exit(parent, child):
    """``parent`` forks ``child`` and exits (a zombie until reaped)."""

    def event(w):
        w.procs[parent] = "Z"
        w.procs[child] = "R"

    return event


def sweep(world, churn):
    return runner.sweep_strays(
        world.listing, world.kill, churn=churn, reap=world.reap, expired=lambda: world.passes > 50
    )


def test_a_child_forked_between_listing_and_check_is_killed():
    w = World({10: "R"}, after_listing=[fork_and_exit(10, 11)])
    assert sweep(w, churn=True) is True
    assert w.running() == [] and w.killed == [11]


def test_a_zombie_that_stays_counts_once():
    w = World({20: "Z"}, reaped=False)  # its parent never waits for it
    assert sweep(w, churn=True) is True
    assert w.passes == 2  # the pass that saw it first, then one that saw nothing new


def test_a_vanished_process_forces_one_more_pass():
    def vanish(w):
        del w.procs[30]

    w = World({30: "R"}, after_listing=[vanish])
    assert sweep(w, churn=True) is True
    assert w.passes == 2 and w.killed == []


def test_without_churn_a_pass_without_a_kill_ends_the_sweep():
    w = World({10: "R"}, after_listing=[fork_and_exit(10, 11)])
    assert sweep(w, churn=False) is True
    assert w.passes == 1 and w.running() == [11]  # the local rule: the child is out of reach


def test_the_sweep_gives_up_once_expired():
    def forever(w):  # a new child every pass, forked after the listing
        w.procs[max(w.procs) + 1] = "R"

    w = World({40: "R"}, after_listing=[forever] * 100)
    assert runner.sweep_strays(w.listing, w.kill, churn=True, reap=w.reap, expired=lambda: w.passes >= 5) is False
    assert w.passes == 5


def supervisor(monkeypatch, mode, world):
    """A Supervisor whose /proc and signals are ``world``'s (its own pid is spared)."""
    sup = runner.Supervisor({"mode": mode})
    monkeypatch.setattr(sup, "_pids", world.pids)
    monkeypatch.setattr(sup, "_alive", lambda pid: world.procs.get(pid) == "R")
    monkeypatch.setattr(sup, "_stat", lambda path: [b"R"] if int(path.split("/")[2]) in world.procs else None)
    monkeypatch.setattr(sup, "_is_stray", lambda pid, fields: True)
    monkeypatch.setattr(sup, "reap", world.reap)
    monkeypatch.setattr(runner, "_sigkill", world.kill)
    return sup


def test_container_supervisor_sweeps_the_forked_child(monkeypatch):
    w = World({1: "R", 10: "R"}, after_listing=[fork_and_exit(10, 11)])
    assert supervisor(monkeypatch, "container", w).kill_strays() is True
    assert w.running() == [1] and w.killed == [11]  # PID 1 (the supervisor) is spared


def test_local_supervisor_keeps_its_old_rule(monkeypatch):
    w = World({10: "R"}, after_listing=[fork_and_exit(10, 11)])
    assert supervisor(monkeypatch, "local", w).kill_strays() is True
    assert w.passes == 1 and w.running() == [11]
