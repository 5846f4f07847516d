"""Showcase 4's maths (bench/live_groups_showcase.py): the tree's entitlement by hierarchical
progressive filling, the guarantees and the starved stretches, against hand-worked cases on
the showcase's pool (36 cpus, 192 GiB, 4 GPUs; sci 0.5 = cpu 0.5 + mem 0.5, ml 0.5 = gpu 1)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))  # the bench imports its siblings
_spec = importlib.util.spec_from_file_location("live_groups_showcase",
                                               BENCH / "live_groups_showcase.py")
showcase = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = showcase
_spec.loader.exec_module(showcase)

GIB = 1024
#: More than the pool holds: C cpu-heavy, M memory-heavy, G on GPUs.
CPU_HEAVY, MEMORY_HEAVY, GPU_BOUND = (120, 60 * GIB, 0), (30, 360 * GIB, 0), (24, 64 * GIB, 16)


def test_the_gpu_project_saturated_on_gpus_leaves_the_rest_to_its_cousins() -> None:
    entitled = showcase.hdrf_entitlement({"group_sci.cpu": CPU_HEAVY,
                                          "group_sci.mem": MEMORY_HEAVY,
                                          "group_ml.gpu": GPU_BOUND})
    # All rise at one rate (sci's two projects at half ml's) until the 4 GPUs are taken at
    # sci.cpu = sci.mem = 0.5 (cpus: 18 + 8 + 6 = 32 of 36); then sci's projects go on
    # alone until the cpus are full: 36 = 52 s + 6, s = 30 / 52.
    assert entitled == pytest.approx({"group_sci.cpu": 30 / 52, "group_sci.mem": 30 / 52,
                                      "group_ml.gpu": 1.0})


def test_a_project_with_little_demand_leaves_its_part_to_its_sibling_first() -> None:
    small = (1, 12 * GIB, 0)  # sci.mem wants one job: 1/16 of the memory
    entitled = showcase.hdrf_entitlement({"group_sci.cpu": CPU_HEAVY, "group_sci.mem": small,
                                          "group_ml.gpu": GPU_BOUND})
    assert entitled["group_sci.mem"] == pytest.approx(1 / 16)
    # Until then (t = 1/4) sci.cpu held 1/16 and ml 1/8; then sci.cpu alone has sci's half of
    # the rate, as fast as ml (cousins do not get it), until the cpus are full:
    # 36 (1/16 + x) + 1 + 6 (1/8 + x) = 36, x = 32 / 42.
    assert entitled["group_sci.cpu"] == pytest.approx(1 / 16 + 32 / 42)
    assert entitled["group_ml.gpu"] == pytest.approx(1 / 8 + 32 / 42)


def test_guarantees_are_the_products_of_the_quotas_on_the_path() -> None:
    assert {leaf: showcase.guarantee(leaf) for leaf in showcase.LEAVES} == {
        "group_sci.cpu": 0.25, "group_sci.mem": 0.25, "group_ml.gpu": 0.5}


def test_a_starved_stretch_is_counted_in_whole_cycles() -> None:
    def moment(at: float, *starved: str):
        return showcase.Moment(at, {}, {}, frozenset(starved), (0.0, 0.0, 0.0))

    moments = [moment(0.0, "group_ml.gpu"), moment(5.0, "group_ml.gpu", "group_sci.mem"),
               moment(9.5), moment(12.0, "group_sci.mem")]
    # ml starved 0-9.5 s (4 cycles of 2 s), sci.mem 5-9.5 then 12-20.
    assert showcase.starved_cycles(moments, 0.0, 20.0) == 4
    assert showcase.starved_cycles(moments, 0.0, 12.0) == 4
    assert showcase.starved_cycles(moments, 9.0, 20.0) == 4  # 12-20: 8 s
