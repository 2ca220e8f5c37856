//! A post to the chat surface: how long one may be, how a reply is split
//! into posts, and the surface's refusal of one.
//!
//! A leaf: the engine's configuration takes its default post length from
//! here, and the seam's `PostDone` input carries a [`PostError`], so neither
//! has to reach up into the messenger.

/// Longest single post by default (`EngineConfig::messenger_post_limit_chars`);
/// longer replies are split at whitespace where possible.
pub const POST_SOFT_LIMIT_CHARS: usize = 2_000;

/// The surface refused a post (a rate limit, an outage, a message too long).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostError(pub String);

/// Splits a reply into posts of at most `limit` characters, preferring to
/// break after whitespace.
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let mut posts = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > limit {
        let window = &rest[..limit];
        let cut = window.iter().rposition(|character| character.is_whitespace()).map_or(limit, |at| at + 1);
        posts.push(rest[..cut].iter().collect());
        rest.drain(..cut);
    }
    if !rest.is_empty() {
        posts.push(rest.into_iter().collect());
    }
    posts
}

#[cfg(test)]
mod tests {
    use super::split_text;

    #[test]
    fn split_breaks_after_whitespace_and_keeps_every_character() {
        let posts = split_text("aaa bbb ccc", 5);
        assert_eq!(posts, vec!["aaa ", "bbb ", "ccc"]);
        assert_eq!(posts.concat(), "aaa bbb ccc");
    }

    #[test]
    fn split_cuts_a_word_longer_than_the_limit() {
        assert_eq!(split_text("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert!(split_text("", 3).is_empty());
    }
}
