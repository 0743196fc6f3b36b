#!/usr/bin/env python3
"""Simulates where a keyed table puts its keys, for the table's design and the alternatives to it.

    python3 benches/placement.py            # a million keys, replaced ten times (about a minute)
    python3 benches/placement.py 100000     # a tenth of that, ten times faster
    python3 benches/placement.py --group 4  # groups of one cache line instead of two

The model is the flood test's steady state (`tests/flood.rs`): keys arrive one after another,
each is live until `capacity` more keys have arrived (then it is idle and its slot is free
again), so that `capacity` keys are live at every moment once the table has filled. The table has
one 8-slot group per 8 × 0.68 = 5.44 keys of capacity (a load of 0.68, as `src/store/table.rs`
builds it); only the number of live keys in each group matters, so that is all the model keeps. A key that finds no free slot
in the groups it may use overflows and takes no slot.

For each way of choosing a key's group it prints the share of insertions that overflowed while
the table filled and once it was full (the crate promises under 0.1%, and the flood test
measures 0.062% with the real table), and the share of keys that sit in their first group once
full (a lookup that finds the key there need not wait for a second group's lines).

- two random groups, the less loaded (the table's design; ties go to the first group, where the
  table gives them to the group with fewer slots taken: the model keeps only the live keys, an
  idle key's slot is free in it, so it cannot tell an empty slot from an idle one);
- the group and its neighbour, the less loaded ("spilling to a neighbour group": both groups are
  one 256-byte span of memory, so a lookup would wait for one fetch instead of two);
- two groups of one 4 KiB page, the less loaded (the second group random among the 32 groups of
  the first one's page: a lookup would miss the TLB once instead of twice);
- one group only (a lookup waits for one group; nothing to choose);
- two random groups, biased: the first group while it holds fewer than k live keys, else the
  less loaded (a lookup could then try the first group alone, and most often stop there).

With `--group 4` the groups are of one cache line instead of two (a check would fetch two lines,
not four): with the table's two random groups, 3.9% of insertions overflow once full, against
0.072% with its 8-slot groups (100 000 keys).

The model is a simulation, not the table: it ignores shards, hash quality, and concurrent inserts.
Its figure for the table's design, 0.069% once full (a million keys), is close to the flood test's
measured 0.062%, and at a load of 0.8 (`--load 0.8`) it gives 2.4% where the flood test measured
2.1%.
"""
import argparse
import collections
import random

# Slots per group (8: two cache lines of 16-byte slots) and groups per 4 KiB page; `--group`
# changes both, for smaller or larger groups than the table's.
GROUP = 8
PAGE_GROUPS = 4096 // (16 * GROUP)


def simulate(capacity, rounds, load, choose, seed=1):
    """Returns (overflows while filling, overflows once full, share in the first group)."""
    rnd = random.Random(seed)
    groups = -(-int(capacity / load) // GROUP)
    live = [0] * groups
    order = collections.deque()  # each key's group, or None if it overflowed, oldest first
    overflows = [0, 0]
    first = 0
    placed = 0
    for t in range((rounds + 1) * capacity):
        full = t >= capacity
        g = choose(rnd, groups, live)
        if g is None:
            overflows[full] += 1
        else:
            live[g[0]] += 1
            if full:
                placed += 1
                first += g[1]
        order.append(None if g is None else g[0])
        if len(order) > capacity:
            old = order.popleft()
            if old is not None:
                live[old] -= 1
    return overflows[0] / capacity, overflows[1] / (rounds * capacity), first / max(placed, 1)


def two_random(bias=None):
    def choose(rnd, groups, live):
        a = rnd.randrange(groups)
        b = rnd.randrange(groups)
        if b == a:
            b = (a + 1) % groups
        if bias is not None and live[a] < bias:
            return a, True
        if live[a] >= GROUP and live[b] >= GROUP:
            return None
        return (b, False) if live[b] < live[a] else (a, True)

    return choose


def neighbours(rnd, groups, live):
    a = rnd.randrange(groups)
    b = (a + 1) % groups
    if live[a] >= GROUP and live[b] >= GROUP:
        return None
    return (b, False) if live[b] < live[a] else (a, True)


def same_page(rnd, groups, live):
    a = rnd.randrange(groups)
    page = a - a % PAGE_GROUPS
    size = min(PAGE_GROUPS, groups - page)
    b = page + (a - page + 1 + rnd.randrange(max(size - 1, 1))) % size
    if live[a] >= GROUP and live[b] >= GROUP:
        return None
    return (b, False) if live[b] < live[a] else (a, True)


def one_group(rnd, groups, live):
    a = rnd.randrange(groups)
    return None if live[a] >= GROUP else (a, True)


def main():
    global GROUP, PAGE_GROUPS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("capacity", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=10, help="times every key is replaced")
    parser.add_argument("--load", type=float, default=17 / 25, help="capacity / slots")
    parser.add_argument("--group", type=int, default=8,
                        help="slots per group (4: one cache line; the table's are 8)")
    args = parser.parse_args()
    GROUP, PAGE_GROUPS = args.group, 4096 // (16 * args.group)
    variants = [
        ("two random groups, less loaded (the design)", two_random()),
        ("a group and its neighbour, less loaded", neighbours),
        ("two groups of one 4 KiB page, less loaded", same_page),
        ("one group", one_group),
    ] + [(f"two random groups, first while under {k}", two_random(k))
         for k in range(max(1, GROUP - 3), GROUP)]
    print(
        f"{args.capacity} keys live, replaced {args.rounds} times, load {args.load:.2f}, "
        f"{GROUP}-slot groups"
    )
    print(f"{'placement':<46} {'overflows: filling':>18} {'full':>9} {'in first group':>15}")
    for name, choose in variants:
        filling, full, first = simulate(args.capacity, args.rounds, args.load, choose)
        print(f"{name:<46} {filling:>17.3%} {full:>9.3%} {first:>15.1%}")


if __name__ == "__main__":
    main()
