"""Placements (`core/placement.py`): each one's choice and score, the shape index kept current
by events and never missing a node with room, and the option that chooses one in `simulate`
and in the daemon's config."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from gridfair.core.negotiator import Negotiator
from gridfair.core.placement import BUCKET_SCAN, PLACEMENTS, Placement
from gridfair.core.pool import DONE, EPSILON, Node, Pool, PoolListener, Task
from gridfair.errors import ConfigError
from gridfair.policies.drf import DrfOrder
from gridfair.policies.registry import build_stages
from gridfair.sim.scenario import Scenario, run_scenario
from gridfair.sim.workloads.taskcsv import scan_tasks
from tests.conftest import TEST_DATA

GIB = 1024.0
SCORED = sorted(set(PLACEMENTS) - {"fastest"})


def placed_pool(nodes: list[Node], placement: str) -> tuple[Pool, Negotiator]:
    pool = Pool()
    for node in nodes:
        pool.add_node(node)
    negotiator = Negotiator(pool, DrfOrder(resources=("cpus", "memory")),
                            placement=PLACEMENTS[placement]())
    return pool, negotiator


def three_machines() -> list[Node]:
    """Equally fast machines of three shapes: 1 GiB a cpu, 8 GiB a cpu, and a small one."""
    return [Node("thin", None, power=400, cpus=4, memory=4 * GIB),
            Node("fat", None, power=400, cpus=4, memory=32 * GIB),
            Node("small", None, power=200, cpus=2, memory=8 * GIB)]


# Worked by hand for a task of 1 cpu and 4000 MiB (the module docstring's formulas).
EXPECTED = {
    "fastest": "thin",  # all equally fast: the machine added first
    "condor": "small",  # fewest free cpus
    "align": "thin",  # 0.25 x 1 + 4000/4096 x 1 = 1.23, against 0.37 (fat) and 0.99 (small)
    "shape": "small",  # its free shape (0.52, 0.48) is the demand's (0.53, 0.47)
    "most-allocated": "thin",  # (0.25 + 0.98) / 2, against 0.19 (fat) and 0.49 (small)
    "balanced": "small",  # 1 - |0.5 - 0.49| / 2, against 0.64 (thin) and 0.94 (fat)
}


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
def test_each_placement_chooses_by_its_score(name: str) -> None:
    pool, negotiator = placed_pool(three_machines(), name)
    task = Task("A.0", "A", 0.0, cpus=1, memory=4000)
    assert negotiator.placement.choose(task).name == EXPECTED[name]


@pytest.mark.parametrize("name", SCORED)
def test_a_scored_placement_packs_what_fastest_strands(name: str) -> None:
    """Small-memory jobs first: `fastest` puts them on the fat machine (added first), whose
    memory the big-memory jobs then cannot reach; a placement by shape puts them on the thin
    one and all eight run (`align` seven: once the thin machine is half full, its alignment
    with a small job falls below the empty fat machine's, which takes the third)."""
    results = {}
    for placement in ("fastest", name):
        nodes = [Node("fat", None, power=400, cpus=4, memory=64 * GIB),
                 Node("thin", None, power=400, cpus=4, memory=8 * GIB)]
        pool, negotiator = placed_pool(nodes, placement)
        for number in range(4):
            negotiator.submit(Task(f"A.{number}", "A", 0.0, cpus=1, memory=2 * GIB,
                                   duration=10), 0.0)
        for number in range(4, 8):
            negotiator.submit(Task(f"A.{number}", "A", 0.0, cpus=1, memory=14 * GIB,
                                   duration=10), 0.0)
        negotiator.cycle(0.0)
        results[placement] = pool.running
    assert results == {"fastest": 4, name: 7 if name == "align" else 8}


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
def test_the_reason_names_the_placement_and_its_score(name: str) -> None:
    pool, negotiator = placed_pool(three_machines(), name)
    task = Task("A.0", "A", 0.0, cpus=1, memory=4000, duration=10)
    negotiator.submit(task, 0.0)
    decision, = negotiator.cycle(0.0)
    placement = negotiator.placement
    assert decision.figures["placement"] == name
    score = decision.figures["placement_score"]
    assert f"; {name} placement chose {EXPECTED[name]} ({placement.score_text} {score:.6g})" \
        in decision.reason


def random_pool(seed: int, placement: str) -> tuple[Pool, Negotiator, random.Random]:
    rng = random.Random(seed)
    nodes = [Node(f"m{number}", None, power=rng.choice((100, 200, 300)) * cpus, cpus=cpus,
                  memory=cpus * rng.choice((1, 2, 4, 8, 16)) * GIB)
             for number, cpus in enumerate(rng.choice((1, 2, 4, 8, 16)) for _ in range(60))]
    pool, negotiator = placed_pool(nodes, placement)
    return pool, negotiator, rng


@pytest.mark.parametrize("name", SCORED)
def test_the_index_follows_events_and_never_misses_a_node_with_room(name: str) -> None:
    """Start and stop tasks at random: after each, the placement's choice is a node with room
    exactly when one exists, and the same as a placement indexing the pool afresh."""
    pool, negotiator, rng = random_pool(7, name)
    running: list[Task] = []
    for number in range(600):
        if running and rng.random() < 0.4:
            pool.finish(running.pop(rng.randrange(len(running))), float(number))
            continue
        task = Task(f"t{number}", "A", float(number), cpus=rng.choice((1, 1, 2, 4, 8)),
                    memory=rng.choice((0.5, 1, 3, 12, 40)) * GIB, duration=1)
        negotiator.submit(task, float(number))
        chosen = negotiator.placement.choose(task)
        fresh: Placement = PLACEMENTS[name]()
        fresh.attach(pool)
        assert chosen is fresh.choose(task)
        has_room = any(pool.fits_free(task, node) for node in pool.nodes)
        assert (chosen is not None) == has_room
        if chosen is not None:
            assert pool.fits_free(task, chosen)
            pool.start(task, chosen, float(number))
            running.append(task)
        else:
            pool.drop(task, float(number))


def test_an_unknown_placement_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown placement policy 'tightest'.*condor"):
        build_stages("drf", placement="tightest")


def test_simulate_takes_placement_and_names_it_in_its_output(gridfair_cli) -> None:
    arguments = ["simulate", "hosep-table1", "-w", "low", "-p", "drf", "--format", "json"]
    plain = json.loads(gridfair_cli(*arguments).output)
    condor = json.loads(gridfair_cli(*arguments, "--placement", "condor").output)
    assert "placement" not in plain  # recorded outputs stay byte for byte
    assert condor["placement"] == "condor"
    refused = gridfair_cli(*arguments, "--placement", "tightest")
    assert refused.exit_code == 2
    assert "tightest" in refused.output


def test_the_daemon_config_names_a_placement_and_refuses_an_unknown_one() -> None:
    from gridfair.daemon.config import validate
    from gridfair.daemon.cycle import stages_from_config

    config = validate({"backend": {"kind": "sim"}, "policy": {"placement": "shape"}},
                      base=Path("."))
    assert stages_from_config(config["policy"]).placement.name == "shape"
    with pytest.raises(ConfigError, match="policy.placement"):
        validate({"backend": {"kind": "sim"}, "policy": {"placement": "tightest"}},
                 base=Path("."))


def test_shape_is_fastest_on_one_cpu_slots_without_memory(gridfair_cli) -> None:
    """docs/placement.md: every free slot has the same shape, so the tie goes to the fastest."""
    arguments = ["simulate", "hosep-table1", "-w", "medium", "-p", "hosep", "--format",
                 "json", "-q"]
    fastest = json.loads(gridfair_cli(*arguments, "--placement", "fastest").output)
    shape = json.loads(gridfair_cli(*arguments, "--placement", "shape").output)
    assert shape.pop("placement") == "shape"
    fastest.pop("placement")
    assert shape == fastest


class NeverOverCommitted(PoolListener):
    """Fails a run the moment a start leaves a node with less than nothing free."""

    def task_started(self, task: Task, now: float) -> None:
        node = task.node
        assert node.free_cpus >= -EPSILON and node.free_memory >= -EPSILON, (task, node)


@pytest.mark.parametrize("name", SCORED)
def test_a_slice_of_the_google_trace_runs_whole_on_machines_of_its_shapes(
        name: str, tmp_path: Path) -> None:
    """The derived Google task file's first 2,000 tasks (its slice in tests/data) on 40
    machines of the trace's shapes (bench/placement_sim.py's pool, smaller): every task runs
    to its end, no node is ever over-committed, and a second run finishes every task at the
    same time."""
    path = TEST_DATA / "google" / "tasks_parts00000-00001.head3000.csv.gz"
    with gzip.open(path, "rt") as lines:
        (tmp_path / "slice.csv").write_text("".join(next(lines) for _ in range(2000)))
    shapes = [(0.5, 0.5), (0.5, 0.25), (0.5, 0.75), (1.0, 1.0), (0.25, 0.25)]
    finishes = []
    for _ in range(2):
        trace = scan_tasks(tmp_path / "slice.csv")
        nodes = [Node(f"g{number}", None, 1000.0 * shapes[number % 5][0],
                      cpus=shapes[number % 5][0], memory=shapes[number % 5][1])
                 for number in range(40)]
        result, _ = run_scenario(Scenario(nodes, list(trace.tasks)), order="drf",
                                 policy_options={"resources": ("cpus", "memory")},
                                 allocation="backfill", placement=name,
                                 listeners=[NeverOverCommitted()])
        assert all(task.state == DONE for task in result.tasks)
        finishes.append([task.finish_time for task in result.tasks])
    assert finishes[0] == finishes[1]


@pytest.mark.parametrize("name", SCORED)
def test_a_whole_machine_job_has_a_machine_kept_until_it_drains(name: str) -> None:
    """Two 4-cpu machines each running a small job; a whole-machine job finds no room, so the
    machine with fewer cpus in use is kept for it: small jobs submitted meanwhile go to the
    other one or wait, and once the kept machine's job ends the big job starts there."""
    nodes = [Node("a", None, power=400, cpus=4, memory=16 * GIB),
             Node("b", None, power=400, cpus=4, memory=16 * GIB)]
    pool, negotiator = placed_pool(nodes, name)
    for number, cpus in enumerate((2, 1)):
        task = Task(f"small.{number}", "small", 0.0, cpus=cpus, memory=GIB, duration=10)
        negotiator.submit(task, 0.0)
        pool.start(task, nodes[number], 0.0)
    whole = Task("whole.0", "whole", 1.0, cpus=4, memory=4 * GIB, duration=10)
    negotiator.submit(whole, 1.0)
    assert negotiator.cycle(1.0) == []
    assert negotiator.placement.reservations.node_of(whole) is nodes[1]  # 1 cpu in use
    for number in range(2, 6):
        negotiator.submit(Task(f"small.{number}", "small", 2.0, cpus=1, memory=GIB,
                               duration=10), 2.0)
    started = negotiator.cycle(2.0)
    assert {decision.node.name for decision in started} == {"a"}  # b is kept
    pool.finish(pool.tasks["small.1"], 10.0)
    decision, = negotiator.cycle(10.0)
    assert (decision.task, decision.node) == (whole, nodes[1])
    assert negotiator.placement.reservations.by_node == {}


def test_a_kept_machine_is_let_go_when_its_job_leaves_the_queue() -> None:
    nodes = [Node("a", None, power=400, cpus=4, memory=16 * GIB)]
    pool, negotiator = placed_pool(nodes, "shape")
    small = Task("small.0", "small", 0.0, cpus=1, memory=GIB, duration=10)
    negotiator.submit(small, 0.0)
    negotiator.cycle(0.0)
    whole = Task("whole.0", "whole", 1.0, cpus=4, memory=GIB, duration=10)
    negotiator.submit(whole, 1.0)
    negotiator.cycle(1.0)
    assert negotiator.placement.reservations.node_of(whole) is nodes[0]
    pool.drop(whole, 2.0)
    later = Task("small.1", "small", 3.0, cpus=1, memory=GIB, duration=10)
    negotiator.submit(later, 3.0)
    decision, = negotiator.cycle(3.0)
    assert decision.task is later


def test_nothing_is_kept_on_a_pool_of_one_cpu_slots() -> None:
    """A one-cpu job asks for a whole one-cpu slot, but a slot wholly in use is no fragment:
    the job waits for a slot as any job does (here the only free slot has too little memory),
    and the order, not a kept slot, says who gets the next one."""
    nodes = [Node("slot0", None, power=100, cpus=1, memory=GIB),
             Node("slot1", None, power=100, cpus=1, memory=GIB / 2)]
    pool, negotiator = placed_pool(nodes, "shape")
    busy = Task("busy.0", "busy", 0.0, cpus=1, memory=GIB, duration=10)
    negotiator.submit(busy, 0.0)
    pool.start(busy, nodes[0], 0.0)
    negotiator.submit(Task("waiting.0", "waiting", 1.0, cpus=1, memory=GIB, duration=10), 1.0)
    assert negotiator.cycle(1.0) == []
    assert negotiator.placement.reservations.by_node == {}


def many_too_small(name: str) -> tuple[Pool, Negotiator]:
    """One bucket of 400 one-cpu slots: 399 with 1 GiB, fastest first, and one slow one with
    3 GiB, for a task of 1 cpu and 2 GiB."""
    nodes = [Node(f"small{number}", None, power=1000 - number, cpus=1, memory=GIB)
             for number in range(399)]
    nodes.append(Node("roomy", None, power=100, cpus=1, memory=3 * GIB))
    nodes.append(Node("large", None, power=400, cpus=32, memory=256 * GIB))
    return placed_pool(nodes, name)


@pytest.mark.parametrize("name", SCORED)
def test_the_whole_look_passes_over_slots_too_small_together(name: str) -> None:
    """When no bucket's first nodes fit, the look at whole buckets finds the one slot that
    fits among hundreds too small, testing it and not them one by one."""
    pool, negotiator = many_too_small(name)
    large = pool.nodes[-1]
    pool.submit(filler := Task("filler", "B", 0.0, cpus=32, memory=256 * GIB), 0.0)
    pool.start(filler, large, 0.0)
    tested = []
    fits = pool.fits_free
    pool.fits_free = lambda task, node: tested.append(node) or fits(task, node)
    pool.matcher = lambda task, node: True  # every node tested through `fits_free`
    chosen = negotiator.placement.choose(Task("t", "A", 0.0, cpus=1, memory=2 * GIB))
    assert chosen is not None and chosen.name == "roomy"
    assert len(tested) < 50, len(tested)  # BUCKET_SCAN in the first look, then the one


@pytest.mark.parametrize("name", SCORED)
@pytest.mark.parametrize("seed", range(6))
def test_a_choice_is_each_buckets_first_fit_best_scored(name: str, seed: int) -> None:
    """Against the rule worked out over every node: each bucket's first fitting node in its
    order (fastest, then added first), among its first `BUCKET_SCAN` nodes when any bucket
    has one there, else anywhere in it; of those the best scored. On pools where buckets
    hold many nodes too small, part used at random."""
    rng = random.Random(seed)
    nodes = [Node(f"m{number}", None, power=rng.choice((100, 150, 300)) * size, cpus=size,
                  memory=size * rng.choice((0.25, 0.5, 1, 2, 4)) * GIB)
             for number, size in enumerate(rng.choice((1, 1, 1, 2, 4, 32))
                                           for _ in range(300))]
    pool, negotiator = placed_pool(nodes, name)
    placement = negotiator.placement
    for number in range(200):
        task = Task(f"t{number}", "A", 0.0, cpus=rng.choice((1, 2, 3)),
                    memory=rng.choice((0.3, 0.9, 1.5, 5)) * GIB, duration=1)
        negotiator.submit(task, 0.0)
        index = placement.index
        firsts, soon, seen = {}, {}, Counter()
        for node in sorted(pool.nodes, key=lambda node: (-node.power_per_cpu, node.index)):
            key = index.where.get(node.index)
            if key is None:
                continue
            seen[key] += 1
            if key not in firsts and pool.fits_free(task, node):
                firsts[key] = node
                if seen[key] <= BUCKET_SCAN:
                    soon[key] = node
        expected = max((soon or firsts).values(), default=None,
                       key=lambda node: (placement.score(task, node), node.power_per_cpu,
                                         -node.index))
        chosen = placement.choose(task)
        assert chosen is expected
        if chosen is not None:
            pool.start(task, chosen, 0.0)


@pytest.mark.parametrize("name", ("shape", "condor"))
def test_a_bounded_placement_scores_few_buckets(name: str) -> None:
    """On a pool of 121 free shapes, a decision scores a few buckets, not every one that fits
    (83 a decision here): those whose bound is below the best found are passed over."""
    pool, negotiator = placed_pool(
        [Node(f"m{cpus}-{gib}", None, power=100 * cpus, cpus=cpus, memory=gib * GIB)
         for cpus in range(1, 33, 3) for gib in range(4, 257, 24)], name)
    placement, scored = negotiator.placement, []
    score = placement.score
    placement.score = lambda task, node: scored.append(node) or score(task, node)
    for number in range(20):
        placement.choose(Task(f"t{number}", "A", 0.0, cpus=1 + number % 7,
                              memory=(2 + 9 * number % 120) * GIB))
    assert len(scored) < 20 * 20, len(scored) / 20  # 10 (shape), 4 (condor)
