//! Seeds per generation. Generation 1 of a run draws from the run's seed;
//! every later one (the process that replaced an evicted one) from a seed
//! mixed from the run's seed and its number: a restarted engine does not
//! redraw the bits (and ids) its predecessor drew, as a real restart would
//! not, and the run stays a function of its seed. The SDKs derive the same
//! numbers (`generationSeed` in adapters/node/random.mjs, `generation_seed`
//! in adapters/python/turnsim_sdk/seeding.py), held to the vectors in
//! adapters/tests/fixtures/generation-seeds.json.

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's finaliser: a well-mixed word from any word.
fn splitmix64_mix(value: u64) -> u64 {
    let mut z = value;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of `generation`'s generator in a run seeded `seed`.
pub fn generation_seed(seed: u64, generation: u32) -> u64 {
    if generation <= 1 {
        return seed;
    }
    splitmix64_mix(seed.wrapping_add(u64::from(generation).wrapping_mul(GOLDEN_GAMMA)))
}
