"""softswitch's P4Runtime server under requests meant to hurt it: a Read repeating a large table,
values far wider than their fields, batches whose errors overflow a trailer, requests over the
size limits, streams that never arbitrate, streams opened and abandoned by the hundred, and
pipelines pushed again and again while others write and read. Each runs against a real
softswitch process (or an in-process one where the test must shorten a timeout) through real
gRPC clients, some of them with gRPC's default settings, and checks that the server answers
with the status it should and that a controller is still served.
"""
from __future__ import annotations

import contextlib
import socket
import statistics
import threading
import time

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc as pbg

from benchmarks.p4runtime_hostile import CHURN_CYCLES, CHURNERS, churn_streams
from p4rt_support import (DEL, INS, MOD, Client, Stream, action, exact, lpm, require_program, running_switch,
                          softswitch_process, table_entry, update_errors)
from softswitch.p4runtime import intake, server, status, wire
from softswitch.p4runtime.errors import MAX_MESSAGE_CHARS
from softswitch.p4runtime.server import MAX_CONCURRENT_READS
from softswitch.p4runtime.streams import MAX_JOINED_STREAMS, MAX_PENDING_STREAMS

ENTRIES = 1024                  # t_exact of tests/p4/tables.p4 holds this many


@pytest.fixture
def tables_prog():
    return require_program("tables")


@pytest.fixture
def target():
    with softswitch_process() as t:
        yield t


@pytest.fixture
def primary(target, tables_prog):
    """The primary controller of the target, with the tables program pushed."""
    c = Client(target.grpc_addr)
    c.open_stream()
    c.set_pipeline(tables_prog)
    yield c
    c.close()


def _exact_entry(p, key: int, value: bytes = b"\x01") -> pb.Entity:
    return table_entry(p.table_id("t_exact"), [exact(p.field_id("t_exact", "k16"), key.to_bytes(2, "big"))],
                       action(p.action_id("set_exact"), value))


def _hit_entry(p) -> pb.Entity:
    return table_entry(p.table_id("t_hit"), [exact(p.field_id("t_hit", "k16"), b"\x01")],
                       action(p.action_id("set_hit"), b"\x01"))


def _whole_table(p) -> pb.Entity:
    return pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_exact")))


def _whole_table_variants(p, n: int = 5000) -> list[pb.Entity]:
    """``n`` distinct requests for the whole t_exact (a filter on the parameters of no action
    filters nothing): no merging helps against them, only the deadline stops them."""
    out = []
    for i in range(n):
        e = _whole_table(p)
        e.table_entry.action.action.params.add(param_id=i + 1)
        out.append(e)
    return out


def _read(client: Client, entities: list[pb.Entity], timeout: float) -> list[pb.Entity]:
    out = []
    for resp in client.stub.Read(pb.ReadRequest(device_id=1, entities=entities), timeout=timeout):
        out.extend(resp.entities)
    return out


# -- item 2: a hostile Read ---------------------------------------------------------------------------
def test_hostile_reads_do_not_hold_off_the_primarys_write(target, primary, tables_prog):
    p = tables_prog
    primary.write_ok(*[(INS, _exact_entry(p, k)) for k in range(ENTRIES)])
    hostile = Client(target.grpc_addr, election=None)        # never arbitrates
    whole, variants = _whole_table(p), _whole_table_variants(p)
    outcome: dict[str, object] = {}

    def repeated() -> None:
        outcome["repeated"] = _read(hostile, [whole] * 20000, timeout=60)

    def distinct(n: int) -> None:
        try:
            _read(hostile, variants, timeout=4)
            outcome[f"distinct{n}"] = "finished"
        except grpc.RpcError as e:
            outcome[f"distinct{n}"] = e.code()

    threads = [threading.Thread(target=repeated)] + [threading.Thread(target=distinct, args=(n,))
                                                      for n in range(MAX_CONCURRENT_READS - 1)]
    for t in threads:
        t.start()
    time.sleep(0.5)                                   # the Reads are being answered
    t0 = time.monotonic()
    primary.write_ok((INS, _hit_entry(p)))           # its timeout is 10 s
    waited = time.monotonic() - t0
    print(f"\nthe primary's Write waited {waited * 1000:.0f} ms while {len(threads)} hostile Reads ran")
    for t in threads:
        t.join(timeout=90)
    # a request naming the table 20,000 times is answered with each entry once
    got = outcome["repeated"]
    assert len(got) == ENTRIES, len(got)
    assert len({e.SerializeToString() for e in got}) == ENTRIES
    # 5,000 distinct whole-table requests (five million entries) end at their deadline ...
    for n in range(MAX_CONCURRENT_READS - 1):
        assert outcome[f"distinct{n}"] == grpc.StatusCode.DEADLINE_EXCEEDED, outcome
    # ... and the server stopped building them: every Read slot is free again
    deadline = time.monotonic() + 20
    while True:
        results: list = []
        readers = [threading.Thread(target=lambda: results.append(_try_read(hostile, whole)))
                   for _ in range(MAX_CONCURRENT_READS)]
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        if all(r == ENTRIES for r in results) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert results == [ENTRIES] * MAX_CONCURRENT_READS, results
    hostile.close()


def _try_read(client: Client, entity: pb.Entity) -> int | grpc.StatusCode:
    try:
        return len(_read(client, [entity], timeout=20))
    except grpc.RpcError as e:
        return e.code()


def _wait_answering(calls: list, timeout: float) -> None:
    """Wait until every call in ``calls`` has started answering and none of them has ended."""
    waiters = [threading.Thread(target=call.initial_metadata, daemon=True) for call in calls]
    for w in waiters:
        w.start()
    deadline = time.monotonic() + timeout
    for w in waiters:
        w.join(max(0.0, deadline - time.monotonic()))
    started = sum(not w.is_alive() for w in waiters)
    assert started == len(calls), f"only {started} of {len(calls)} idle Reads were answering after {timeout:g} s"
    ended = [(call.code(), call.details()) for call in calls if call.done()]
    assert not ended, f"idle Reads ended before the test could use them: {ended}"


def test_reads_beyond_the_concurrency_limit_are_refused_and_writes_go_on(target, primary, tables_prog):
    p = tables_prog
    primary.write_ok(*[(INS, _exact_entry(p, k)) for k in range(ENTRIES)])
    whole, variants = _whole_table(p), _whole_table_variants(p)
    # clients that start Reads and never take the answers (no deadline either)
    idle = [Client(target.grpc_addr, election=None) for _ in range(MAX_CONCURRENT_READS)]
    calls = [c.stub.Read(pb.ReadRequest(device_id=1, entities=variants)) for c in idle]
    try:
        # each idle Read holds its slot once its handler runs; its first answer (and with it the
        # initial metadata) shows it does (on a loaded machine handlers may start seconds late)
        _wait_answering(calls, timeout=30)
        with pytest.raises(grpc.RpcError) as e:
            _read(primary, [whole], timeout=10)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "Reads" in e.value.details()
        primary.write_ok((INS, _hit_entry(p)))
    finally:
        for call in calls:
            call.cancel()
        for c in idle:
            c.close()
    deadline = time.monotonic() + 20
    while _try_read(primary, whole) != ENTRIES and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _try_read(primary, whole) == ENTRIES


# -- item 3: bounded messages and trailers --------------------------------------------------------------
def test_oversized_match_value_is_out_of_range_with_a_bounded_message(target, primary, tables_prog):
    p = tables_prog
    default = Client(target.grpc_addr, election=(0, 2), options=[])     # gRPC's own limits
    default.open_stream()                                                # the new primary

    def entity(size: int) -> pb.Entity:
        return table_entry(p.table_id("t_exact"), [exact(p.field_id("t_exact", "k16"), b"\x01" * size)],
                           action(p.action_id("set_exact"), b"\x01"))
    huge = 3 << 20                                   # within the Write bound, 200,000 times too wide
    (code, message), = default.write((INS, entity(huge)))
    assert code == "OUT_OF_RANGE"
    assert f"({huge} bytes)" in message and len(message) <= MAX_MESSAGE_CHARS, message
    with pytest.raises(grpc.RpcError) as e:          # a Read of one such key: its own status
        default.read(entity(128 << 10))
    assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert f"({128 << 10} bytes)" in e.value.details() and len(e.value.details()) <= status.MAX_STATUS_MESSAGE
    default.close()


def test_a_batch_of_ten_thousand_failures_reaches_a_default_client(target, primary, tables_prog):
    p = tables_prog
    default = Client(target.grpc_addr, election=(0, 2), options=[])
    default.open_stream()
    wide = exact(p.field_id("t_exact", "k16"), b"\x07" * 300)   # OUT_OF_RANGE, quoted in its message
    bad_table = table_entry(0x0DEAD, [], action(p.action_id("set_exact"), b"\x01"))     # NOT_FOUND
    updates = [(INS, _exact_entry(p, 1))]
    expected = ["OK"]
    for n in range(9999):
        if n % 2:
            updates.append((INS, table_entry(p.table_id("t_exact"), [wide], action(p.action_id("set_exact"), b"\x01"))))
            expected.append("OUT_OF_RANGE")
        else:
            updates.append((INS, bad_table))
            expected.append("NOT_FOUND")
    req = pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=2))
    for utype, entity in updates:
        req.updates.add(type=utype, entity=entity)
    with pytest.raises(grpc.RpcError) as e:
        default.stub.Write(req, timeout=60)
    err = e.value
    assert err.code() == grpc.StatusCode.UNKNOWN, (err.code(), err.details())   # not RESOURCE_EXHAUSTED
    details = update_errors(err)
    assert details is not None and 10 <= len(details) < len(updates)
    assert [code for code, _ in details] == expected[:len(details)]          # in order, from the first
    assert all(len(m) <= status.MAX_DETAIL_MESSAGE for _, m in details)
    assert "9999 of 10000 updates failed" in err.details()
    assert f"details list updates 0..{len(details) - 1} only" in err.details()
    assert len(err.details()) <= status.MAX_STATUS_MESSAGE
    trailer = dict(err.trailing_metadata())["grpc-status-details-bin"]
    assert len(trailer) < 8192                       # gRPC's default limit for a client's metadata
    assert default.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_exact")))) != []
    default.close()


# -- item 3: request size limits --------------------------------------------------------------------------
def test_requests_over_the_limits_are_refused_before_they_cost_memory(target, primary, tables_prog):
    p = tables_prog
    sender = grpc.insecure_channel(target.grpc_addr, options=[("grpc.max_send_message_length", -1)])
    raw = {name: sender.unary_unary(f"/p4.v1.P4Runtime/{name}", request_serializer=None, response_deserializer=None)
           for name in ("SetForwardingPipelineConfig", "Write")}
    rss_before = target.memory_mib()
    # over gRPC's own limit: gRPC refuses it
    req = pb.SetForwardingPipelineConfigRequest(device_id=1, election_id=pb.Uint128(low=1),
                                                action=pb.SetForwardingPipelineConfigRequest.VERIFY)
    req.config.p4info.CopyFrom(p.p4info)
    req.config.p4_device_config = b" " * (intake.MAX_REQUEST_BYTES + 1)
    with pytest.raises(grpc.RpcError) as e:
        raw["SetForwardingPipelineConfig"](req.SerializeToString(), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # within gRPC's limit but over the Write bound: refused unparsed (parsed at once, 4 MiB of
    # updates took a gigabyte)
    updates_field = pb.WriteRequest.DESCRIPTOR.fields_by_name["updates"].number
    update = wire.length_delimited(updates_field, pb.Update(type=INS, entity=_exact_entry(p, 1)).SerializeToString())
    data = pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=1)).SerializeToString() + \
        update * (intake.MAX_WRITE_BYTES // len(update) + 1000)
    assert len(data) > intake.MAX_WRITE_BYTES
    with pytest.raises(grpc.RpcError) as e:
        raw["Write"](data, timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "limit" in e.value.details()
    # a P4Info over its bound inside an acceptable request
    big_info = pb.SetForwardingPipelineConfigRequest(device_id=1, election_id=pb.Uint128(low=1),
                                                     action=pb.SetForwardingPipelineConfigRequest.VERIFY)
    big_info.config.p4info.CopyFrom(p.p4info)
    big_info.config.p4info.pkg_info.doc.description = "x" * (intake.MAX_P4INFO_BYTES + 1)
    with pytest.raises(grpc.RpcError) as e:
        raw["SetForwardingPipelineConfig"](big_info.SerializeToString(), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "P4Info" in e.value.details()
    grown = target.memory_mib("VmHWM") - rss_before
    print(f"\nthe server's peak resident memory grew {grown:.1f} MiB over three refused requests "
          f"of {len(req.SerializeToString()) >> 20}, {len(data) >> 20} and {intake.MAX_P4INFO_BYTES >> 20} MiB")
    assert grown < 64, grown
    primary.write_ok((INS, _exact_entry(p, 7)))
    sender.close()


# -- item 4: streams ------------------------------------------------------------------------------------
def test_idle_streams_cannot_lock_out_a_controller(target, tables_prog):
    c = Client(target.grpc_addr, election=None)
    idle = [Stream(c.stub) for _ in range(MAX_PENDING_STREAMS + MAX_JOINED_STREAMS + 4)]
    time.sleep(0.5)
    # the oldest idle streams were closed to make room for newer ones
    ended = [s.wait_end(timeout=5) for s in idle[:len(idle) - MAX_PENDING_STREAMS]]
    assert ended == [grpc.StatusCode.RESOURCE_EXHAUSTED] * len(ended)
    # observers (arbitrated without an election id) fill every place that arbitrated streams have
    observers = []
    for _ in range(MAX_JOINED_STREAMS):
        s = Stream(c.stub)
        s.arbitrate(None)
        assert s.next("arbitration") is not None
        observers.append(s)
    controller = Client(target.grpc_addr, election=(0, 10))
    s = controller.open_stream()                     # primary: asserted by open_stream
    assert observers[0].wait_end(timeout=5) == grpc.StatusCode.RESOURCE_EXHAUSTED   # made room
    assert all(not o.ended.is_set() for o in observers[1:])
    # a newcomer that would not be primary gets no place
    backup = Stream(c.stub)
    backup.arbitrate((0, 3))
    assert backup.wait_end(timeout=5) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not s.ended.is_set()
    controller.set_pipeline(tables_prog)             # what only the primary may do
    for x in idle + observers + [backup]:
        x.close()
    controller.close()
    c.close()


def test_a_stream_that_never_arbitrates_is_closed():
    with running_switch(ports={}, arbitration_timeout=1.0) as (_, addr):
        c = Client(addr, election=None)
        silent = Stream(c.stub)
        talker = Stream(c.stub)
        talker.arbitrate((0, 1))
        assert talker.next("arbitration").arbitration.status.code == code_pb2.OK
        assert silent.wait_end(timeout=5) == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "arbitration" in silent.end_details
        assert not talker.ended.is_set()
        silent.close()
        talker.close()
        c.close()


# -- streams their clients closed, and Writes during pipeline pushes --------------------------------------
# the churn is the hostile-client benchmark's: 300 streams, five at a time (one at a time rarely met the race)
BACKUPS = MAX_JOINED_STREAMS - 1


def _join_as_backup(stub, election: tuple[int, int], give_up: float, joined: list[Stream]) -> str:
    """Arbitrate on a new stream, kept open in ``joined`` once answered: the answer's code, or
    how the stream ended. Refused for lack of room, it tries again until ``give_up``
    (monotonic): the streams closed last may still be leaving; a place never freed keeps it
    refused."""
    while True:
        s = Stream(stub)
        s.arbitrate(election)
        answer_by = time.monotonic() + 10
        msg = None
        while msg is None and not s.ended.is_set() and time.monotonic() < answer_by:
            msg = s.next("arbitration", timeout=0.2)
        if msg is not None:
            joined.append(s)
            return code_pb2.Code.Name(msg.arbitration.status.code)
        ended = s.wait_end(timeout=1)
        s.close()
        if ended != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > give_up:
            return f"no answer: stream ended {ended} {s.end_details!r}"
        time.sleep(0.5)


def test_streams_their_clients_closed_leave_room_for_new_controllers(target):
    controller = Client(target.grpc_addr, election=(0, 1 << 40))
    controller_stream = controller.open_stream()          # the primary, in the only place taken
    hold = threading.Event()
    per = CHURN_CYCLES // CHURNERS
    churners = [threading.Thread(target=churn_streams, args=(target.grpc_addr, 1000 + n * per, per, hold))
                for n in range(CHURNERS)]
    for t in churners:
        t.start()
    for t in churners:
        t.join()
    hold.set()
    # every controller that arbitrates now, each with its own stream and an election id below
    # the primary's, is answered as a backup: the 300 streams left no place taken
    c = Client(target.grpc_addr, election=None)
    give_up = time.monotonic() + 30
    backups: list[Stream] = []
    answers = [_join_as_backup(c.stub, (0, 100 + n), give_up, backups) for n in range(BACKUPS)]
    assert answers == ["ALREADY_EXISTS"] * BACKUPS, answers
    assert not controller_stream.ended.is_set(), controller_stream.end_details
    assert not any(b.ended.is_set() for b in backups)       # all of them in at once
    for b in backups:
        b.close()
    controller.close()
    c.close()


PUSHES = 10
WRITERS = 3
KEYS_PER_WRITER = 32
NOT_HELD_SHARE = 0.35           # a call issued during a push takes less than this share of one (see the test)
PROBE_EVERY = 0.02              # seconds between two probes, whatever the ones before wait for


def _toggle_entries(client: Client, p, first_key: int, stop: threading.Event, present: set[int],
                    outcomes: list[str]) -> None:
    """Insert, then delete, each of its keys of t_hit, one Write at a time, over and over;
    ``present`` is what the table must hold of them."""
    i = 0
    while not stop.is_set():
        key = first_key + i % KEYS_PER_WRITER
        utype = DEL if key in present else INS
        outcome = _write_outcome(client, (utype, _hit_key(p, key)))
        outcomes.append(outcome)
        if outcome == "OK":
            (present.discard if utype == DEL else present.add)(key)
        i += 1


def _hit_key(p, key: int) -> pb.Entity:
    return table_entry(p.table_id("t_hit"), [exact(p.field_id("t_hit", "k16"), key.to_bytes(2, "big"))],
                       action(p.action_id("set_hit"), b"\x01"))


def _write_outcome(client: Client, update: tuple[int, pb.Entity]) -> str:
    try:
        errors = client.write(update, timeout=120)
    except grpc.RpcError as e:
        return e.code().name
    return "OK" if errors is None else errors[0][0]


def _read_outcome(client: Client, entity: pb.Entity) -> str:
    try:
        _read(client, [entity], timeout=120)
    except grpc.RpcError as e:
        return e.code().name
    return "OK"


def _probe(call, stop: threading.Event, calls: list, at_once: int = 1000) -> None:
    """Run ``call`` in a thread of its own every PROBE_EVERY seconds until ``stop``, unless
    ``at_once`` are still running; ``calls`` gets (start, end, outcome) of each."""
    running = threading.BoundedSemaphore(at_once)

    def timed() -> None:
        t0 = time.monotonic()
        outcome = call()
        calls.append((t0, time.monotonic(), outcome))
        running.release()

    probes = []
    while not stop.wait(PROBE_EVERY):
        if running.acquire(blocking=False):
            probes.append(threading.Thread(target=timed))
            probes[-1].start()
    for t in probes:
        t.join(timeout=150)


def _durations_within(calls: list, pushes: list[tuple[float, float]]) -> list[float]:
    """How long each call issued while a push was under way took, seconds."""
    return [end - start for start, end, _ in calls if any(p_start <= start < p_end for p_start, p_end in pushes)]


def test_writes_and_reads_go_on_while_the_pipeline_is_pushed_again(target, primary, tables_prog):
    p = tables_prog
    # forwarding state that RECONCILE_AND_COMMIT replays into each new pipeline: 4 full tables
    filled = {"t_exact": "k16", "t_lpm": "k32", "t_constdef": "k16", "t_defparam": "k32"}
    for table, field in filled.items():
        fid, width = p.field_id(table, field), 2 if field == "k16" else 4
        match = [lpm(fid, (k << 8).to_bytes(4, "big"), 24) if table == "t_lpm" else exact(fid, k.to_bytes(width, "big"))
                 for k in range(ENTRIES)]
        primary.write_ok(*[(INS, table_entry(p.table_id(table), [m], action(p.action_id(table.replace("t_", "set_")),
                                                                             b"\x01"))) for m in match])
    stop = threading.Event()
    writers = [Client(target.grpc_addr, election=(0, 1)) for _ in range(WRITERS)]
    prober = Client(target.grpc_addr, election=(0, 1))
    present: list[set[int]] = [set() for _ in writers]
    outcomes: list[str] = []
    write_calls: list = []
    read_calls: list = []
    hit_table = pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_hit")))
    hit_default = pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_hit"), is_default_action=True,
                                                      action=pb.TableAction(action=action(p.action_id("set_hit"),
                                                                                          b"\x02"))))
    threads = [threading.Thread(target=_toggle_entries, args=(w, p, n * KEYS_PER_WRITER, stop, present[n], outcomes))
               for n, w in enumerate(writers)]
    threads += [threading.Thread(target=_probe, args=(lambda: _write_outcome(prober, (MOD, hit_default)), stop,
                                                      write_calls)),
                threading.Thread(target=_probe, args=(lambda: _read_outcome(prober, hit_table), stop, read_calls,
                                                      MAX_CONCURRENT_READS - 1))]
    for t in threads:
        t.start()
    pushes = []
    try:
        for _ in range(PUSHES):
            time.sleep(0.3)
            t0 = time.monotonic()
            primary.set_pipeline(p, action=pb.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
            pushes.append((t0, time.monotonic()))
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=150)
    # every Write and Read finished, and well
    assert set(outcomes) == {"OK"}, sorted(set(outcomes))
    assert {o for _, _, o in write_calls} == {"OK"}, sorted({o for _, _, o in write_calls})
    assert {o for _, _, o in read_calls} == {"OK"}, sorted({o for _, _, o in read_calls})
    # every Write acknowledged, during a push or not, is in the pipeline the pushes left
    got = {int.from_bytes(e.table_entry.match[0].exact.value, "big") for e in primary.read(hit_table)}
    assert got == set().union(*present)
    for table in filled:                                                             # and the rest
        assert len(primary.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id(table))))) == ENTRIES
    # Writes and Reads issued while a push was under way did not wait for it: they took a small
    # part of a push. Where a push holds them off (its state copied and replayed under the
    # lock), a call issued during it waits out the rest of its locked part: in trials of that
    # bug their median took 41-66% of a push's median (beside a busy build, and with two busy
    # loops besides), without it 6-13% beside the build and 20-28% with the loops too (whether
    # they finished before their push did told the two apart less well: 14-51% against 48-88%).
    during = _durations_within(write_calls + read_calls, pushes)
    push_s = statistics.median(end - start for start, end in pushes)
    print(f"\n{len(during)} Writes and Reads issued during {PUSHES} pushes took {statistics.median(during) * 1e3:.1f} ms "
          f"(median), a push {push_s * 1e3:.0f} ms")
    assert _durations_within(write_calls, pushes) and _durations_within(read_calls, pushes)
    assert statistics.median(during) < NOT_HELD_SHARE * push_s, (statistics.median(during), push_s)
    for c in writers + [prober]:
        c.close()


class _Relay:
    """A TCP relay to the switch that can fall silent: frozen, it forwards nothing more either
    way and closes nothing, as when a client's host vanishes (no FIN, no RST)."""

    def __init__(self, upstream: str):
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._frozen = threading.Event()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            self._socks += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
                if not data or self._frozen.is_set():
                    return
                dst.sendall(data)
            except OSError:
                return

    def freeze(self) -> None:
        self._frozen.set()

    def close(self) -> None:
        for s in [self._listener, *self._socks]:
            s.close()


def test_controllers_whose_host_vanished_leave_room(monkeypatch):
    """Streams whose client's host went silent (no FIN, no RST) end once pings go unanswered."""
    monkeypatch.setattr(server, "KEEPALIVE_S", 1.0)          # 20 s and 60 s by default
    monkeypatch.setattr(server, "KEEPALIVE_TIMEOUT_S", 1.0)
    with running_switch(ports={}) as (_, addr):
        controller = Client(addr, election=(0, 1 << 40))
        controller_stream = controller.open_stream()
        relay = _Relay(addr)
        far = Client(relay.addr, election=None)
        vanishing = []
        for n in range(BACKUPS):                              # every other place taken through the relay
            vanishing.append(Stream(far.stub))
            vanishing[-1].arbitrate((0, 100 + n))
            assert vanishing[-1].next("arbitration") is not None
        relay.freeze()                                        # their host is gone, silently
        near = Client(addr, election=None)
        backups: list[Stream] = []
        give_up = time.monotonic() + 30                       # gRPC alone would wait 60 s for a ping's answer
        answers = [_join_as_backup(near.stub, (0, 200 + n), give_up, backups) for n in range(BACKUPS)]
        assert answers == ["ALREADY_EXISTS"] * BACKUPS, answers
        assert not controller_stream.ended.is_set(), controller_stream.end_details
        for s in backups:
            s.close()
        relay.close()
        for c in (controller, far, near):
            c.close()
