//! Work shared among threads: each thread takes the next item as it
//! finishes one, and every result comes back in its item's place, so what
//! a command reports does not depend on how many threads ran it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `each` of `items` on up to `jobs` threads, each result in its item's
/// place. No item starts once `stop` says so: the places of those left
/// are `None`.
pub fn in_order<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    stop: impl Fn() -> bool + Sync,
    each: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                while !stop() {
                    let at = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(at) else { break };
                    let result = each(item);
                    *results[at].lock().expect("result lock") = Some(result);
                }
            });
        }
    });
    results.into_iter().map(|slot| slot.into_inner().expect("result lock")).collect()
}

/// [`in_order`] with nothing to stop it: every item's result, in order.
pub fn all_in_order<T: Sync, R: Send>(items: &[T], jobs: usize, each: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let results = in_order(items, jobs, || false, each);
    results.into_iter().map(|result| result.expect("nothing stops the pool short")).collect()
}
