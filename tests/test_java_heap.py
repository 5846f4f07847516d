"""java.util.PriorityQueue's order of equal keys (`gridfair.sim.java_heap`).

Each expected order below is derived by hand from OpenJDK's PriorityQueue (offer: siftUp from
the end, moving a parent down only while the new key is strictly smaller; poll: the last
entry sifted down from the root, taking the right child only if strictly smaller than the
left and stopping at a child not strictly smaller; remove: removeAt, the last entry sifted
down from the hole, then up if it stayed there), and was checked against OpenJDK 17's
PriorityQueue on this machine. A first-in-first-out queue, or Python's heapq with an
insertion counter, gives a different order in each case.
"""

from __future__ import annotations

from gridfair.sim.java_heap import JavaPriorityQueue


class Entry:
    """An item the queue holds, found again by identity as Java finds an event."""

    def __init__(self, name: str) -> None:
        self.name = name


def drain(queue: JavaPriorityQueue[Entry]) -> list[str]:
    return [queue.poll()[1].name for _ in range(len(queue))]


def queue_of(*entries: tuple[float, str]) -> tuple[JavaPriorityQueue[Entry], dict[str, Entry]]:
    queue: JavaPriorityQueue[Entry] = JavaPriorityQueue()
    offered = {}
    for key, name in entries:
        offered[name] = Entry(name)
        queue.offer(key, offered[name])
    return queue, offered


def test_equal_keys_come_out_in_the_heaps_order_not_first_in_first_out():
    # a, b, c at 1 fill [a, b, c]; d at 0 sifts up past b (index 1) and a: [d, a, c, b].
    # poll d: the last, b, is sifted down from the root, where a (left) is not strictly
    # smaller, so b stays: [b, a, c]. poll b: c sifted down stays: [c, a]. Then c, a.
    queue, _ = queue_of((1.0, "a"), (1.0, "b"), (1.0, "c"), (0.0, "d"))
    assert queue.peek_key() == 0.0
    assert drain(queue) == ["d", "b", "c", "a"]


def test_a_removal_moves_the_last_entry_into_the_hole():
    # Five equal keys: [a, b, c, d, e]. remove b: e fills index 1 (d, its only child, is not
    # strictly smaller): [a, e, c, d]. poll a: d is sifted from the root and stays there (the
    # right child c is not strictly smaller than the left e, and d is not greater than e):
    # [d, e, c]. poll d: c stays at the root: [c, e]. Then c, e.
    queue, offered = queue_of(*((1.0, name) for name in "abcde"))
    assert queue.remove(offered["b"])
    assert drain(queue) == ["a", "d", "c", "e"]


def test_a_removal_sifts_the_moved_entry_up_when_it_stays_in_the_hole():
    # [a0, b5, c2, d6, e7, f2]. remove d (index 3, a leaf): f2 fills it and sifts up past b5:
    # [a0, f2, c2, b5, e7]. poll a: e7 sifted down from the root goes left (c2 is not strictly
    # smaller than f2), so f, offered after c with the same key, comes out first. Without the
    # sift up, c would.
    queue, offered = queue_of((0.0, "a"), (5.0, "b"), (2.0, "c"), (6.0, "d"), (7.0, "e"),
                              (2.0, "f"))
    assert queue.remove(offered["d"])
    assert drain(queue) == ["a", "f", "c", "b", "e"]


def test_removal_finds_an_item_by_identity_and_says_when_it_is_absent():
    first, second = ["x"], ["x"]  # equal, not the same object
    queue: JavaPriorityQueue[list[str]] = JavaPriorityQueue()
    queue.offer(1.0, first)
    assert not queue.remove(second)
    assert queue.remove(first)
    assert len(queue) == 0
