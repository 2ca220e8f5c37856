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

#[cfg(test)]
mod tests {
    use super::generation_seed;

    /// The vectors every implementation is held to.
    const VECTORS: &str = include_str!("../../../adapters/tests/fixtures/generation-seeds.json");

    #[test]
    fn matches_the_shared_vectors() {
        let vectors: Vec<(u64, u32, u64)> = serde_json::from_str::<Vec<serde_json::Value>>(VECTORS)
            .expect("the vectors parse")
            .iter()
            .map(|vector| {
                let number = |key: &str| vector[key].as_str().expect("decimal strings").parse::<u64>().expect("a u64");
                (number("seed"), number("generation") as u32, number("derived"))
            })
            .collect();
        assert!(vectors.len() >= 4, "the vector file holds the cases");
        for (seed, generation, derived) in vectors {
            assert_eq!(generation_seed(seed, generation), derived, "seed {seed}, generation {generation}");
        }
    }

    #[test]
    fn generations_draw_apart() {
        let seeds: Vec<u64> = (1..=5).map(|generation| generation_seed(7, generation)).collect();
        let mut distinct = seeds.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), seeds.len(), "every generation of a run has a seed of its own: {seeds:?}");
        assert_eq!(seeds[0], 7, "generation 1 draws from the run's seed");
    }
}
