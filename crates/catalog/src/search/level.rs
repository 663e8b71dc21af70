//! How well a query token matches a term, and the packed form in which
//! matching carries the levels of every token of a query at once.

/// Levels are packed two bits per query token into a `u32`, so longer queries
/// keep their first sixteen distinct tokens.
pub(super) const MAX_QUERY_TOKENS: usize = 16;
/// Shorter tokens ("a", "id", "to") are contained in too many words for a
/// substring hit to mean anything; they must match a term's start.
pub(super) const MIN_CONTAINS_LEN: usize = 3;

pub(super) const NONE: u8 = 0;
pub(super) const CONTAINS: u8 = 1;
pub(super) const PREFIX: u8 = 2;
pub(super) const EXACT: u8 = 3;

/// Token `t`'s level in a packed set of levels (two bits each, as the
/// query's `pack_levels` packs them).
pub(super) fn level_at(packed: u32, t: usize) -> u8 {
    // Masked to two bits, so the narrowing cannot lose anything.
    ((packed >> (2 * t)) & 0b11) as u8
}

/// The tokens whose level in a packed set passes `keep`, one bit each.
pub(super) fn tokens_where(packed: u32, keep: impl Fn(u8) -> bool) -> u16 {
    (0..MAX_QUERY_TOKENS).fold(0u16, |bits, t| {
        bits | (u16::from(keep(level_at(packed, t))) << t)
    })
}

/// Whether a packed set of levels matches some token at least as a prefix:
/// the term then counts towards its field's coverage share.
pub(super) fn covers(packed: u32) -> bool {
    tokens_where(packed, |l| l >= PREFIX) != 0
}

/// Whether a packed set of levels matches some token exactly.
pub(super) fn exact_in(packed: u32) -> bool {
    tokens_where(packed, |l| l == EXACT) != 0
}

/// The tokens a packed set of levels matches as a prefix, one bit each.
pub(super) fn prefix_bits(packed: u32) -> u16 {
    tokens_where(packed, |l| l == PREFIX)
}

/// The tokens a packed set of levels matches at all, one bit each.
pub(super) fn token_bits(packed: u32) -> u16 {
    tokens_where(packed, |l| l != NONE)
}

/// Keeps, per token, the higher of the current level and the packed one.
pub(super) fn raise_levels(best: &mut [u8; MAX_QUERY_TOKENS], packed: u32, count: usize) {
    for (t, level) in best.iter_mut().take(count).enumerate() {
        *level = (*level).max(level_at(packed, t));
    }
}
