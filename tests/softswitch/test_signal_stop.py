"""The stop flag that signals set (softswitch.signal_stop): a signal landing at any moment of a
main loop's wait stops the loop. The loop runs in a child process so that a deadlock, which is
what `threading.Event.set()` in a handler produced about one signal in six, fails the test by
its timeout instead of hanging the suite."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from softswitch.signal_stop import SignalStop

ROUNDS = 300

# Each round: a fresh flag, a timer signal some hundred microseconds ahead, and the tightest wait
# loop, so that the signal lands inside wait() as often as between calls.
LOOP = textwrap.dedent(f"""
    import random, signal
    from softswitch.signal_stop import SignalStop
    rng = random.Random(1)
    for _ in range({ROUNDS}):
        stop = SignalStop((signal.SIGALRM,))
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-4, 1e-3))
        while not stop.wait(1e-5):
            pass
        stop.close()
    print("stopped", {ROUNDS})
""")


def test_every_signal_stops_the_wait_loop():
    # about 1 ms a round; 60 s leaves room for a busy machine, while a deadlock never returns
    done = subprocess.run([sys.executable, "-c", LOOP], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["stopped", str(ROUNDS)]


def test_set_from_another_thread_wakes_a_waiter():
    stop = SignalStop(())
    try:
        assert not stop.wait(0.01) and not stop.is_set()
        threading.Timer(0.05, stop.set).start()
        assert stop.wait(30)
        assert stop.is_set() and stop.wait(0)
    finally:
        stop.close()
