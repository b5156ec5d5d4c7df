"""Which host runs what, in which order: the plans of sweeps and A/B tests over a host pool, pure.

Repeats of one configuration go to different hosts in turn, so a slow node shows up as a host effect
instead of hiding in one configuration's numbers; each host works in rounds, so drift over the session
weighs on every configuration alike. An A/B round is an A and a B launch on one host, A B then B A,
so a host's speed and a linear drift both cancel in the difference.

>>> sweep_queues(3, 2, 3)  # (combination, launch) per host: each combination on two hosts
[[(0, 0), (2, 1)], [(1, 0), (0, 1)], [(2, 0), (1, 1)]]
>>> [[(s.side, s.block) for s in q] for q in ab_queues(4, 2, interleave=True, reuse_launch=False)]
[[('a', 0), ('b', 0), ('b', 2), ('a', 2)], [('b', 1), ('a', 1), ('a', 3), ('b', 3)]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Side", "Slot", "Spread", "sweep_queues", "ab_queues", "split"]

Side = Literal["a", "b"]
#: ``"alternate"``: a configuration's launches rotate over the hosts; ``"same"``: all on one host.
Spread = Literal["alternate", "same"]


@dataclass(frozen=True)
class Slot:
    """One launch of an A/B test: its side, the benchmark runs on it, and its block (the pair it belongs to)."""

    side: Side
    benches: int
    block: int


def split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` as evenly as possible, larger shares first.

    >>> split(5, 3)
    [2, 2, 1]
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def sweep_queues(variants: int, launches: int, hosts: int, spread: Spread = "alternate") -> list[list[tuple[int, int]]]:
    """Per host, the ``(combination, launch)`` pairs it runs, in order: rounds of launches.

    Launch ``l`` of combination ``v`` goes to host ``(v + l) % hosts`` (``"alternate"``) or ``v % hosts``.
    """
    if spread not in ("alternate", "same"):
        raise ValueError(f"spread must be 'alternate' or 'same', got {spread!r}")
    if variants < 1 or launches < 1 or hosts < 1:
        raise ValueError(f"need at least one combination, launch and host (got {variants}, {launches}, {hosts})")
    queues: list[list[tuple[int, int]]] = [[] for _ in range(hosts)]
    for launch in range(launches):
        for variant in range(variants):
            host = (variant + launch) % hosts if spread == "alternate" else variant % hosts
            queues[host].append((variant, launch))
    return queues


def ab_queues(repeats: int, hosts: int, *, interleave: bool, reuse_launch: bool) -> list[list[Slot]]:
    """Per host, the launches of an A/B test in order, each with its block (the pair it belongs to).

    Interleaved, round ``r`` runs on host ``r % hosts``, neighbouring hosts starting on opposite sides
    (block = round); else block = host (``reuse_launch``: one launch per side, B first on odd hosts).
    """
    if repeats < 1 or hosts < 1:
        raise ValueError(f"repeats and hosts must be >= 1, got {repeats} and {hosts}")
    used = min(hosts, repeats)
    queues: list[list[Slot]] = [[] for _ in range(hosts)]
    if reuse_launch:
        for host, share in enumerate(split(repeats, used)):
            sides: list[Side] = ["a", "b"] if host % 2 == 0 else ["b", "a"]
            queues[host] = [Slot(side, share, host) for side in sides]
        return queues
    if not interleave:
        for host, share in enumerate(split(repeats, used)):
            queues[host] = [Slot("a", 1, host)] * share + [Slot("b", 1, host)] * share
        return queues
    for round_no in range(repeats):
        host, turn = round_no % hosts, round_no // hosts
        order: list[Side] = ["a", "b"] if (turn + host) % 2 == 0 else ["b", "a"]
        queues[host] += [Slot(side, 1, round_no) for side in order]
    return queues
