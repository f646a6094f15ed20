"""The fabric description file (aifabric.lab.description): written, read back, checked, and kept to
its JSON Schema. No fabric is brought up here."""
from __future__ import annotations

import copy
import json

import pytest

from aifabric.lab import description as D
from topologies.fabric import fat_tree, leaf_spine


def _desc(fabric=None) -> D.FabricDescription:
    return D.FabricDescription.from_fabric(
        fabric or fat_tree(4), target="softswitch",
        pipeline=D.PipelineFiles("/x/fabric.p4info.txtpb", "/x/fabric.json"),
        controller=D.ControllerInfo("aifabric", (0, 1), "", ("FabricIngress.forwarding.routing_v4",)),
        switch_pids={"p0e0": 1234}, host_pids={"p0e0h0": 4321})


@pytest.mark.parametrize("fabric", [fat_tree(4), leaf_spine(3, 2, 2)], ids=["fat_tree", "leaf_spine"])
def test_written_file_loads_back_equal_and_gives_the_same_fabric(fabric, tmp_path):
    desc = _desc(fabric)
    path = desc.write(tmp_path / "fabric.json")
    loaded = D.load(path)
    assert loaded == desc
    assert loaded.to_fabric() == fabric
    assert not list(tmp_path.glob(".*.tmp")), "the temporary file was left behind"


def test_what_a_controller_needs_is_in_the_file(tmp_path):
    data = json.loads(_desc().write(tmp_path / "f.json").read_text())
    edge = next(s for s in data["switches"] if s["name"] == "p0e0")
    assert (edge["device_id"], edge["p4runtime_address"], edge["pid"]) == (1, "127.0.0.1:50001", 1234)
    assert {"port": 1, "interface": "p0e0-eth1", "peer": "p0e0h0", "peer_port": 0} in edge["ports"]
    assert {"port": 3, "interface": "p0e0-eth3", "peer": "p0a0", "peer_port": 1} in edge["ports"]
    host = data["hosts"][0]
    assert host == {"name": "p0e0h0", "ipv4": "10.0.0.2/24", "ipv6": "fd00::2/64",
                    "mac": "00:00:0a:00:00:02", "gateway4": "10.0.0.1", "gateway6": "fd00::1", "switch": "p0e0",
                    "port": 1, "interface": "p0e0h0-eth0", "pid": 4321}
    assert data["controller"] == {"kind": "aifabric", "election_id": [0, 1], "role": "",
                                  "owned_tables": ["FabricIngress.forwarding.routing_v4"]}
    assert len(data["links"]) == 16 + 16 + 16


def test_yaml_is_read_when_pyyaml_is_there(tmp_path):
    yaml = pytest.importorskip("yaml")
    desc = _desc(leaf_spine(2, 1, 1))
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(desc.to_dict()))
    assert D.load(path) == desc


def test_a_description_made_by_hand_with_the_least_fields(tmp_path):
    """A user's own file: two switches, one host each, no pipeline or controller section."""
    data = {"schema": D.SCHEMA, "kind": "leaf_spine", "params": {},
            "switches": [{"name": "l0", "device_id": 1, "p4runtime_address": "switches:50001", "role": "leaf",
                          "mac": "02:00:00:00:00:01"},
                         {"name": "l1", "device_id": 2, "p4runtime_address": "switches:50002", "role": "leaf",
                          "mac": "02:00:00:00:00:02"}],
            "links": [{"a": "h0", "a_port": 0, "b": "l0", "b_port": 1}, {"a": "l0", "a_port": 2, "b": "l1", "b_port": 2}],
            "hosts": [{"name": "h0", "ipv4": "10.1.0.2/24", "ipv6": "fd00:1::2/64", "mac": "00:00:0a:01:00:02",
                       "gateway4": "10.1.0.1", "gateway6": "fd00:1::1", "switch": "l0", "port": 1}]}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    desc = D.load(path)
    assert desc.controller.kind == "none" and desc.pipeline is None
    assert desc.host("h0").interface == "h0-eth0"
    fabric = desc.to_fabric()
    assert fabric.switch("l1").grpc_address == "switches:50002"


def _mutate(path: str, value):
    """A change to a good description: set the field at ``path`` (dots and [i]) to ``value``
    (``...`` removes it)."""
    def apply(data):
        parts = path.replace("[", ".").replace("]", "").split(".")
        obj = data
        for part in parts[:-1]:
            obj = obj[int(part)] if part.isdigit() else obj[part]
        last = parts[-1]
        if value is ...:
            del obj[last]
        else:
            obj[int(last) if last.isdigit() else last] = value
        return data
    return apply


BAD = [
    ("schema", "aifabric.fabric-description/9", "schema"),
    ("switches", {"a": 1}, "switches: expected a list"),
    ("switches[3].device_id", "7", "switches[3].device_id: expected an integer"),
    ("switches[3].device_id", 1, "switches[3].device_id: 1 is also switches[0]"),
    ("switches[2].p4runtime_address", "localhost", "switches[2].p4runtime_address"),
    ("switches[1].p4runtime_address", "127.0.0.1:50001", "switches[1].p4runtime_address"),
    ("switches[0].role", "superspine", "switches[0].role"),
    ("switches[0].mac", "02:00:00:00:01", "switches[0].mac"),
    ("switches[0].name", ..., "switches[0].name: missing"),
    ("switches[0].ports[1].port", 600, "switches[0].ports[1].port"),
    ("hosts[5].ipv4", "10.0.300.2/24", "hosts[5].ipv4"),
    ("hosts[5].gateway6", "nope", "hosts[5].gateway6"),
    ("hosts[2].switch", "p9e9", "hosts[2].switch"),
    ("hosts[2].port", 2, "hosts[2].port"),
    ("hosts[0].name", "p0e1", "hosts[0].name"),
    ("links[20].b", "c99", "links[20].b"),
    ("links[0].a_port", True, "links[0].a_port: expected an integer"),
    ("links[20].weight", 0, "links[20].weight: 0 is not a routing cost"),
    ("controller.kind", "onos", "controller.kind"),
    ("controller.election_id", [1], "controller.election_id"),
    ("params.k", "4", "params.k"),
]


@pytest.mark.parametrize("field,value,expected", BAD, ids=[f"{b[0]}={b[1]!r}" for b in BAD])
def test_bad_field_is_named_in_one_line(field, value, expected, tmp_path):
    data = _mutate(field, value)(copy.deepcopy(_desc().to_dict()))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(D.DescriptionError) as err:
        D.load(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ") and expected in message, message


def test_unreadable_or_unparsable_files_are_named(tmp_path):
    with pytest.raises(D.DescriptionError, match=r"missing\.json: cannot read"):
        D.load(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": \n  "x",,}')
    with pytest.raises(D.DescriptionError, match=r"broken\.json: not valid JSON at line 2"):
        D.load(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    with pytest.raises(D.DescriptionError, match=r"list\.json: \(top level\): expected an object"):
        D.load(listed)


def _schema_objects(schema: dict, written: dict, where: str = ""):
    """(where, schema object, written object) for every object the written file holds."""
    yield where, schema, written
    for key, value in written.items():
        sub = schema.get("properties", {}).get(key, {})
        sub = schema.get("$defs", {}).get(sub["$ref"].split("/")[-1], sub) if "$ref" in sub else sub
        if isinstance(value, dict) and "properties" in sub:
            yield from _schema_objects(sub, value, f"{where}.{key}")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            yield from _schema_objects(sub["items"], value[0], f"{where}.{key}[0]")


def test_the_schema_documents_every_field_written_and_requires_what_load_requires(tmp_path):
    schema = json.loads(D.SCHEMA_FILE.read_text())
    written = _desc().to_dict()
    for where, sub, obj in _schema_objects(schema, written):
        undocumented = set(obj) - set(sub.get("properties", {}))
        assert not undocumented, f"{where or 'top level'}: written but not in the schema: {undocumented}"
        for required in sub.get("required", []):
            trimmed = copy.deepcopy(written)
            target = trimmed
            for part in [p for p in where.replace("[0]", ".0").split(".") if p]:
                target = target[int(part)] if part.isdigit() else target[part]
            del target[required]
            path = tmp_path / "trimmed.json"
            path.write_text(json.dumps(trimmed))
            with pytest.raises(D.DescriptionError, match="missing|expected"):
                D.load(path)
    assert schema["properties"]["schema"]["const"] == D.SCHEMA
