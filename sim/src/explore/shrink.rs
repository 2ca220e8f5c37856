//! Shrinking a failing case with proptest's value tree: simplify while the
//! same check still fails, complicate back when it stops failing. The seed
//! is never shrunk (that would only give another random run).

use proptest::strategy::ValueTree;

use super::{case_tree, failure, Case, ExploreOptions};

/// Returns the smallest case found that still fails `check`, and the number
/// of shrink runs it took.
pub fn shrink(seed: u64, case_index: usize, check: &str, options: &ExploreOptions) -> (Case, usize) {
    let mut tree = case_tree(seed, case_index, options.store_faults);
    let fails = |case: &Case| failure(case, &options.regressions).is_some_and(|violation| violation.check == check);
    let mut best = tree.current();
    let mut steps = 0;
    if !tree.simplify() {
        return (best, steps);
    }
    while steps < options.max_shrink_iters {
        steps += 1;
        let candidate = tree.current();
        if fails(&candidate) {
            best = candidate;
            if !tree.simplify() {
                break;
            }
        } else if !tree.complicate() {
            break;
        }
    }
    (best, steps)
}
