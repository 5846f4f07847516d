"""GPUs as a resource: machines have them, tasks ask for them, users are charged for them in
every order (DRF, weighted DRF, SDRF, HTCondor priority with a SLOT_WEIGHT), and a pool
without any computes what it did before GPUs existed."""

from __future__ import annotations

import math

import pytest
from test_drf import running_counts

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import CPUS, GPUS, MEMORY, POWER, Node, Pool, Task
from gridfair.errors import ConfigError, InputError
from gridfair.policies.condor_priority import CondorPriorityOrder, SlotWeight
from gridfair.policies.drf import DrfOrder, counted_resources
from gridfair.policies.registry import build_stages
from gridfair.policies.sdrf import SdrfOrder


def gpu_pool(order=None, *, gpus: float = 4.0) -> tuple[Pool, Negotiator | None]:
    """One unowned machine: 8 cpus (power 8), 32 GiB, `gpus` GPUs."""
    pool = Pool()
    negotiator = Negotiator(pool, order) if order is not None else None
    pool.add_node(Node("gpu-box", None, power=8.0, cpus=8, memory=32768, gpus=gpus))
    return pool, negotiator


def submit(negotiator: Negotiator, user: str, count: int, *, cpus: float = 1.0,
           memory: float = 0.0, gpus: float = 0.0, now: float = 0.0) -> list[Task]:
    tasks = []
    for _ in range(count):
        task = Task(f"{user}.{len(negotiator.pool.tasks)}", user, now, cpus=cpus,
                    memory=memory, gpus=gpus, duration=100.0)
        negotiator.submit(task, now)
        tasks.append(task)
    return tasks


# ------------------------------------------------------------------------------ the pool


def test_a_task_asking_for_gpus_fits_only_where_enough_are_free() -> None:
    pool = Pool()
    pool.add_node(Node("cpu-only", None, power=100.0, cpus=8, memory=1000))
    pool.add_node(Node("gpu-box", None, power=10.0, cpus=8, memory=1000, gpus=2))
    two = Task("u.0", "u", 0.0, cpus=1, gpus=2, duration=1.0)
    one = Task("u.1", "u", 0.0, cpus=1, gpus=1, duration=1.0)
    plain = Task("u.2", "u", 0.0, cpus=1, duration=1.0)
    for task in (two, one, plain):
        pool.submit(task, 0.0)
    # The faster node comes first, but has no GPU.
    assert pool.best_node(two) is pool.nodes_by_name["gpu-box"]
    assert pool.best_node(plain) is pool.nodes_by_name["cpu-only"]
    pool.start(two, pool.best_node(two), 0.0)
    gpu_box = pool.nodes_by_name["gpu-box"]
    assert (gpu_box.free_gpus, gpu_box.used_gpus) == (0.0, 2.0)
    assert pool.best_node(one) is None  # cpus free on gpu-box, no GPU
    assert pool.fits_after_vacate(one, two)
    assert pool.capacity[GPUS] == 2 and pool.used[GPUS] == 2
    assert pool.users["u"].usage == [1.0, 0.0, 10.0 / 8, 2.0]
    pool.finish(two, 1.0)
    assert (gpu_box.free_gpus, gpu_box.used_gpus) == (2.0, 0.0)
    assert pool.users["u"].usage == [0.0, 0.0, 0.0, 0.0] and pool.used[GPUS] == 0


def test_the_exact_fit_counts_gpus_too() -> None:
    pool = Pool(exact_accounting=True)
    pool.add_node(Node("gpu-box", None, power=8.0, cpus=8, memory=8, gpus=1))
    first = Task("u.0", "u", 0.0, cpus=1, gpus=1, duration=1.0)
    second = Task("u.1", "u", 0.0, cpus=1, gpus=1, duration=1.0)
    for task in (first, second):
        pool.submit(task, 0.0)
    pool.start(first, pool.best_node(first), 0.0)
    assert pool.best_node(second) is None


def test_a_loaded_pool_charges_gpus_as_one_built_event_by_event() -> None:
    def tasks():
        return [Task("a.0", "a", 0.0, cpus=2, gpus=1, duration=1.0),
                Task("b.0", "b", 0.0, cpus=1, duration=1.0)]

    built = Pool()
    node = built.add_node(Node("n", "a", 80.0, cpus=8, gpus=2))
    for task in tasks():
        built.submit(task, 0.0)
        built.start(task, node, 0.0)
    loaded = Pool()
    loaded_node = Node("n", "a", 80.0, cpus=8, gpus=2)
    loaded.load([loaded_node], [], [(task, loaded_node, 0.0) for task in tasks()])
    assert loaded.capacity == built.capacity and loaded.used == built.used
    assert {n: u.usage for n, u in loaded.users.items()} == {
        n: u.usage for n, u in built.users.items()}
    assert (loaded_node.free_gpus, loaded_node.used_gpus) == (1.0, 1.0)


# ---------------------------------------------------------------------------- DRF family


def test_gpus_are_counted_only_where_the_pool_has_them() -> None:
    everything = (CPUS, MEMORY, POWER, GPUS)
    assert counted_resources(everything, [8, 8, 8, 0]) == (CPUS, MEMORY, POWER)
    assert counted_resources(everything, [8, 8, 8, 2]) == everything
    assert counted_resources((GPUS,), [8, 8, 8, 0]) == (GPUS,)  # asked for alone: kept


def test_drf_takes_the_gpu_share_as_dominant() -> None:
    # 8 cpus, 4 GPUs. A's tasks <1 cpu, 1 GPU> (GPU share 1/4 each), B's <2 cpus> (1/4).
    order = DrfOrder(resources=("cpus", "gpus"))
    pool, negotiator = gpu_pool(order)
    submit(negotiator, "A", 4, gpus=1)
    submit(negotiator, "B", 4, cpus=2)
    negotiator.cycle(0.0)
    # Ties go to A (seen first): A 1/4, B 1/4, A 1/2, B 1/2, A 3/4 (3 GPUs, 3 cpus); B's
    # third task needs 2 cpus of the 1 left, so A's fourth (1 cpu, 1 GPU) backfills.
    assert running_counts(pool) == {"A": 4, "B": 2}
    figures = order.key_figures(pool.users["A"], 0.0)
    assert (figures["dominant_share"], figures["dominant_resource"]) == (1.0, "gpus")
    figures = order.key_figures(pool.users["B"], 0.0)
    assert (figures["dominant_share"], figures["dominant_resource"]) == (0.5, "cpus")


def test_without_gpus_in_the_pool_drf_figures_are_those_of_the_three_resources() -> None:
    def run(resources):
        pool = Pool()
        order = DrfOrder(resources=resources)
        negotiator = Negotiator(pool, order)
        pool.add_node(Node("n", None, power=90.0, cpus=9, memory=18))
        submit(negotiator, "A", 10, cpus=1, memory=4)
        submit(negotiator, "B", 10, cpus=3, memory=1)
        decisions = negotiator.cycle(0.0)
        return [(d.task.id, d.reason) for d in decisions]

    assert run(("cpus", "memory", "power", "gpus")) == run(("cpus", "memory", "power"))


def test_weighted_drf_divides_the_gpu_share_by_the_weight() -> None:
    order = DrfOrder(weighted=True, resources=("cpus", "gpus"), weights={"A": 3, "B": 1})
    pool, negotiator = gpu_pool(order)
    submit(negotiator, "A", 4, gpus=1)
    submit(negotiator, "B", 4, gpus=1)
    negotiator.cycle(0.0)
    # Weights 3/4 and 1/4: A's keys (1/4)/(3/4) = 1/3, 2/3, 1; B's 1, 2: A takes 3, B 1.
    assert running_counts(pool) == {"A": 3, "B": 1}


def test_sdrf_commits_to_gpus_beyond_the_entitlement() -> None:
    delta = 0.999
    order = SdrfOrder(delta=delta, weights={"A": 1, "B": 1})
    pool, negotiator = gpu_pool(order)
    for task in submit(negotiator, "A", 3, gpus=1):
        pool.start(task, pool.nodes[0], 0.0)
    assert order.counted == (CPUS, MEMORY, POWER, GPUS)  # from the first event after the join
    # A holds 3/4 of the GPUs against an entitlement of 1/2: obar_gpus = 1/4.
    tau = -1.0 / math.log(delta)
    commitments = order.commitments(pool.users["A"], 700.0)
    assert commitments[3] == pytest.approx((1 - math.exp(-700.0 / tau)) * 0.25, rel=1e-12)
    assert commitments[:3] == [0.0, 0.0, 0.0]
    assert order.export_state(700.0)["resources"] == ["cpus", "memory", "power", "gpus"]


def test_sdrf_lays_out_commitments_again_when_the_first_gpu_joins() -> None:
    delta = 0.999
    order = SdrfOrder(delta=delta, weights={"A": 1, "B": 1})
    pool = Pool()
    negotiator = Negotiator(pool, order)
    pool.add_node(Node("cpu", None, power=8.0, cpus=8, memory=8))
    for task in submit(negotiator, "A", 8, cpus=1, memory=1):
        pool.start(task, pool.nodes[0], 0.0)
    assert order.counted == (CPUS, MEMORY, POWER)
    before = order.commitments(pool.users["A"], 100.0)
    saved = order.export_state(100.0)
    assert saved["resources"] == ["cpus", "memory", "power"]
    pool.add_node(Node("gpu", None, power=8.0, cpus=8, memory=8, gpus=2))
    submit(negotiator, "B", 1, now=100.0)  # an event after the join
    assert order.counted == (CPUS, MEMORY, POWER, GPUS)
    after = order.commitments(pool.users["A"], 100.0)
    assert after[:3] == pytest.approx(before) and after[3] == 0.0
    # A state saved before the GPUs came is laid out the same way on import.
    order.import_state(saved)
    assert order.commitments(pool.users["A"], 100.0) == pytest.approx([*before, 0.0])
    with pytest.raises(InputError, match="state has resources"):
        order.import_state({**saved, "resources": ["cpus", "disk", "power"]})


# -------------------------------------------------------------- HTCondor's SLOT_WEIGHT


@pytest.mark.parametrize(("text", "expected"), [
    ("Cpus", (1.0, 0.0, 0.0, 0.0)),
    ("cpus + 10*gpus", (1.0, 0.0, 10.0, 0.0)),
    ("Cpus + Memory / 1024", (1.0, 1 / 1024, 0.0, 0.0)),
    ("2 * (Cpus + GPUs) + 1", (2.0, 0.0, 2.0, 1.0)),
    ("GPUs * 4 - GPUs", (0.0, 0.0, 3.0, 0.0)),
])
def test_slot_weight_reads_linear_expressions(text, expected) -> None:
    weight = SlotWeight.parse(text)
    assert (weight.cpus, weight.memory, weight.gpus, weight.slot) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("Cpus * GPUs", "only sums of Cpus, Memory and GPUs"),
    ("Disk", "unknown attribute 'Disk'"),
    ("Cpus - 2 * GPUs", "every coefficient must be finite and >= 0"),
    ("Cpus +", "is not an expression"),
    ("4", "reads none of Cpus, Memory, GPUs"),
    ("Cpus / 0", "only sums of"),
    ("__import__('os')", "only sums of"),
])
def test_slot_weight_refuses_what_is_not_a_linear_weight(text, message) -> None:
    with pytest.raises(ConfigError, match=message):
        SlotWeight.parse(text)


def test_a_gpu_weighs_as_the_slot_weight_says() -> None:
    # A runs 1 job of 1 cpu and 1 GPU, B 4 jobs of 1 cpu. With SLOT_WEIGHT = Cpus, A uses 1
    # and B 4: A goes first. With Cpus + 10 * GPUs, A uses 11: B goes first.
    def first_served(slot_weight: str) -> str:
        order = CondorPriorityOrder(halflife=3600.0, slot_weight=slot_weight)
        pool, negotiator = gpu_pool(order)
        for task in submit(negotiator, "A", 1, gpus=1) + submit(negotiator, "B", 4):
            pool.start(task, pool.nodes[0], 0.0)
        submit(negotiator, "A", 1, now=3600.0)
        submit(negotiator, "B", 1, now=3600.0)
        return order.first(3600.0).name

    assert first_served("Cpus") == "A"
    assert first_served("Cpus + 10 * GPUs") == "B"


def test_the_registry_passes_the_slot_weight_and_refuses_a_bad_one() -> None:
    stages = build_stages("condor", options={"slot_weight": "Cpus + 10 * GPUs"})
    assert stages.order.slot_weight.gpus == 10.0
    with pytest.raises(ConfigError, match="slot_weight"):
        build_stages("condor", options={"slot_weight": "Cpus ** 2"})
