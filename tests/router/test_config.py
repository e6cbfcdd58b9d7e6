from __future__ import annotations

from pathlib import Path

import pytest
from once.router.config import TopologyError, load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_single_topology_loads():
    t = load_topology(ROOT / "topologies" / "single.yaml")
    assert list(t.routers) == ["A"] and t.routers["A"].listen.port == 5672
    assert t.settings.max_in_flight == 10000 and t.settings.subscriber_grace == 30.0


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"routers": {"A": {"listen": "nowhere"}}}, "f.yaml: routers.A.listen: expected HOST:PORT"),
        ({"routers": {"A": {"listen": "h:1", "mqtt": "1883"}}}, "f.yaml: routers.A.mqtt: expected HOST:PORT"),
        ({"routers": {"A": {"listen": "h:1", "http": "h:99999"}}}, "f.yaml: routers.A.http: expected HOST:PORT"),
        ({"routers": {}}, "f.yaml: routers: expected at least one router"),
        ({"routers": {"A": {"listen": "h:1"}}, "settings": {"max_in_flight": 0}}, "settings.max_in_flight: expected an integer >= 1"),
        ({"routers": {"A": {"listen": "h:1"}}, "settings": {"subscriber_grace": "soon"}}, "settings.subscriber_grace: expected a duration"),
        ({"routers": {"A": {"listen": "h:1"}}, "settings": {"colour": 1}}, "settings.colour: unknown key"),
        ({"routers": {"A": {"listen": "h:1"}}, "links": [["A", "B"]]}, "links[0]: expected a router of ['A']"),
        ({"routers": {"A": {"listen": "h:1"}}, "links": [["A", "A"]]}, "links[0]: expected [A, B] naming two different routers"),
        ([1, 2], "f.yaml: (top level): expected a mapping"),
        ({"routers": {"A": {"listen": "h:1", "inter_router": "h:3"}, "B": {"listen": "h:2", "inter_router": "h:4"}},
          "links": [["A", "B"]]}, "auth.router_secret: expected a shared secret"),
        ({"routers": {"A": {"listen": "h:1"}, "B": {"listen": "h:2", "inter_router": "h:4"}},
          "links": [["A", "B"]], "auth": {"router_secret": "long-enough"}}, "routers.A.inter_router: expected HOST:PORT"),
        # edge routers (router/uplink.py)
        ({"routers": {"A": {"listen": "h:1"}, "E": {"listen": "h:2", "uplink": "A"}}},
         "routers.E.uplink: expected a list of interior router ids of this file"),
        ({"routers": {"A": {"listen": "h:1"}, "E": {"listen": "h:2", "uplink": ["Z"]}}},
         "routers.E.uplink[0]: expected another router of ['A', 'E']"),
        ({"routers": {"A": {"listen": "h:1"}, "E": {"listen": "h:2", "uplink": ["E"]}}},
         "routers.E.uplink[0]: expected another router"),
        ({"routers": {"A": {"listen": "h:1"}, "E": {"listen": "h:2", "uplink": ["A"]},
                      "F": {"listen": "h:3", "uplink": ["E"]}}}, "routers.F.uplink[0]: expected an interior router"),
        ({"routers": {"A": {"listen": "h:1"}, "E": {"listen": "h:2", "mqtt": "h:3", "uplink": ["A"]}}},
         "routers.E.uplink[0]: expected a router listening for mqtt"),
        ({"routers": {"A": {"listen": "h:1"}, "E": {"listen": "h:2", "inter_router": "h:3", "uplink": ["A"]}}},
         "routers.E.inter_router: expected nothing, for an edge"),
        ({"routers": {"A": {"listen": "h:1", "inter_router": "h:3"}, "E": {"listen": "h:2", "uplink": ["A"]}},
          "links": [["A", "E"]], "auth": {"router_secret": "long-enough"}}, "links[0]: expected interior routers"),
    ],
)
def test_errors_name_file_key_and_expectation(doc, message):
    with pytest.raises(TopologyError) as e:
        parse_topology(doc, "f.yaml")
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routers: {A: [\n")
    with pytest.raises(TopologyError, match="bad.yaml: not valid YAML at line"):
        load_topology(bad)
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path / "missing.yaml")


def test_durations_and_links_with_cost():
    t = parse_topology({"routers": {"A": {"listen": "h:1", "inter_router": "h:11"}, "B": {"listen": "h:2", "inter_router": "h:12"}},
                        "links": [{"between": ["A", "B"], "cost": 3}], "settings": {"subscriber_grace": "500ms"},
                        "auth": {"router_secret": "s3cret-s3cret"}})
    assert t.links[0].cost == 3 and t.settings.subscriber_grace == 0.5
