"""Seeds per generation: what a generation's generator starts from.

Generation 1 of a run draws from the run's seed; every later generation
(the process that replaced an evicted one) from a seed mixed from the run's
seed and its number, so a restarted engine does not redraw the bits (and
ids) its predecessor drew, as a real restart would not, and the run is
still a function of its seed. The Node SDK (adapters/node/random.mjs) and
`turnsim engine` (sim/src/protocol/seeding.rs) derive the same numbers;
tests/test_seeding.py holds all three to the same vectors.
"""

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def splitmix64_mix(value):
    """splitmix64's finaliser: a well-mixed 64-bit word from any 64-bit word."""
    z = value & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def generation_seed(seed, generation):
    """The seed of `generation`'s generator in a run seeded `seed` (u64)."""
    if generation <= 1:
        return seed & MASK64
    return splitmix64_mix(seed + generation * GOLDEN_GAMMA)
