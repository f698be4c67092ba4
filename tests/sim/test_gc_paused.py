"""The simulator's pause of the cyclic garbage collector (jobs.gc_paused, used by the engine): restored as it was,
the objects made meanwhile not left to the young generation's next scan, and cyclic garbage among them still
collected."""

import gc
import weakref

import pytest

from dlcluster.sim.jobs import gc_paused as _gc_paused


class _Node:
    pass


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_paused_inside_and_enabled_after(collector_enabled):
    with _gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled(collector_enabled):
    gc.disable()
    with _gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_leaving_the_pause_starts_no_scan_of_what_was_made_inside(collector_enabled):
    started = []

    def on_collection(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(on_collection)
    try:
        with _gc_paused():
            kept = [[i] for i in range(50_000)]   # 50,000 tracked objects: 70 times the young generation's threshold
        after = list(started)
    finally:
        gc.callbacks.remove(on_collection)
    assert after == []   # re-enabled as they were, the next allocation would start a young collection of them all
    oldest = gc.get_objects(generation=2)
    assert any(item is kept[-1] for item in oldest)


def test_cyclic_garbage_made_inside_is_still_collected(collector_enabled):
    with _gc_paused():
        node = _Node()
        node.self = node
        alive = weakref.ref(node)
        del node
    assert alive() is not None   # a cycle: no reference count reaches 0
    gc.collect()
    assert alive() is None
