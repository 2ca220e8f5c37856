//! The harness's plumbing, each piece on its own: escaping for the HTML
//! replay and Mermaid, a later generation's seed, the tail an engine's
//! stderr keeps, the real clock under the simulation, a live run's scratch
//! directory, a panicking run.

mod mermaid {
    use turnsim::mermaid::*;

    #[test]
    fn each_special_character_becomes_one_entity() {
        assert_eq!(escape("#1; a:b"), "#35;1#59; a#58;b");
        assert_eq!(escape("<script>\"x\" & 'y'"), "#60;script#62;#34;x#34; #38; #39;y#39;");
        assert_eq!(escape("two\nlines\r"), "two<br/>lines");
    }

    #[test]
    fn an_entity_in_the_text_is_shown_not_decoded() {
        // The text `#35;` must come out as itself, so its own `#` and `;`
        // are escaped, and nothing is escaped twice.
        assert_eq!(escape("#35;"), "#35;35#59;");
    }
}

mod html {
    use turnsim::html::escape;

    #[test]
    fn markup_characters_become_entities() {
        assert_eq!(
            escape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }
}

mod seeding {
    use turnsim::protocol::seeding::generation_seed;

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

mod world {
    use turnsim::world::guarded;

    #[test]
    fn a_panicking_run_becomes_its_message() {
        assert_eq!(guarded(|| 7), Ok(7));
        assert_eq!(guarded(|| -> u8 { panic!("engine bug") }), Err("engine bug".to_string()));
        let seed = 3;
        assert_eq!(guarded(|| -> u8 { panic!("bug on seed {seed}") }), Err("bug on seed 3".to_string()));
    }
}

mod live {
    use turnsim::live::*;

    #[test]
    fn a_scratch_dir_is_gone_with_everything_in_it_once_dropped() {
        let scratch = ScratchDir::new().expect("made");
        let path = scratch.path().to_path_buf();
        std::fs::create_dir_all(path.join("home/data")).expect("nested");
        std::fs::write(path.join("home/data/db"), b"rows").expect("written");
        let other = ScratchDir::new().expect("made");
        assert_ne!(other.path(), path, "each run has its own");
        drop(scratch);
        assert!(!path.exists(), "{} outlived its run", path.display());
    }
}

mod output {
    use std::time::Duration;

    use turnsim::protocol::output::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_in_bounded_space() {
        let mut tail = Tail::default();
        for round in 0..1_000u32 {
            tail.push(format!("line {round}\n").as_bytes());
            assert!(tail.held() <= 2 * STDERR_TAIL);
        }
        let kept = String::from_utf8_lossy(tail.bytes()).into_owned();
        assert!(kept.ends_with("line 999\n"), "{kept}");
        assert_eq!(kept.len(), STDERR_TAIL);
        let mut huge = Tail::default();
        huge.push(&vec![b'x'; 10 * STDERR_TAIL]);
        assert_eq!(huge.bytes().len(), STDERR_TAIL);
    }

    #[test]
    fn the_real_clock_moves_under_the_simulation() {
        let runtime = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
        let moved = runtime.block_on(async {
            let before = real_now();
            std::thread::sleep(Duration::from_millis(20));
            real_now() - before
        });
        assert!(moved >= Duration::from_millis(20), "{moved:?}");
    }
}
