//! How well a query token matches a term ([`MatchLevel`]), and the packed
//! form in which matching carries the levels of every token of a query at
//! once: two bits a token in a `u32`.

/// Levels are packed two bits per query token into a `u32`, so longer queries
/// keep their first sixteen distinct tokens.
pub(super) const MAX_QUERY_TOKENS: usize = 16;
/// Shorter tokens ("a", "id", "to") are contained in too many words for a
/// substring hit to mean anything; they must match a term's start.
pub(super) const MIN_CONTAINS_LEN: usize = 3;

/// How well a query token (or the whole query) matches a term or a field.
/// The order is the ranking, exact beats prefix beats contains, so levels
/// compare and take the best with `max`. The values are the two bits a
/// level takes in a packed set ([`MatchLevel::packed_at`], [`level_at`]);
/// `repr(u8)` keeps the per-document level tables a byte a level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(super) enum MatchLevel {
    #[default]
    None = 0,
    /// The token is inside the term, and at least [`MIN_CONTAINS_LEN`]
    /// long.
    Contains = 1,
    /// The term starts with the token.
    Prefix = 2,
    /// The term is the token.
    Exact = 3,
}

impl MatchLevel {
    /// The level as token `t`'s two bits of a packed set of levels.
    pub(super) fn packed_at(self, t: usize) -> u32 {
        (self as u32) << (2 * t)
    }
}

/// Token `t`'s level in a packed set of levels (two bits each, see
/// [`MatchLevel::packed_at`]).
pub(super) fn level_at(packed: u32, t: usize) -> MatchLevel {
    // Each arm is its own value, so this compiles to the mask alone.
    match (packed >> (2 * t)) & 0b11 {
        0 => MatchLevel::None,
        1 => MatchLevel::Contains,
        2 => MatchLevel::Prefix,
        _ => MatchLevel::Exact,
    }
}

/// The tokens whose level in a packed set passes `keep`, one bit each.
pub(super) fn tokens_where(packed: u32, keep: impl Fn(MatchLevel) -> bool) -> u16 {
    (0..MAX_QUERY_TOKENS).fold(0u16, |bits, t| {
        bits | (u16::from(keep(level_at(packed, t))) << t)
    })
}

/// Whether a packed set of levels matches some token at least as a prefix:
/// the term then counts towards its field's coverage share.
pub(super) fn covers(packed: u32) -> bool {
    tokens_where(packed, |l| l >= MatchLevel::Prefix) != 0
}

/// Whether a packed set of levels matches some token exactly.
pub(super) fn exact_in(packed: u32) -> bool {
    tokens_where(packed, |l| l == MatchLevel::Exact) != 0
}

/// The tokens a packed set of levels matches as a prefix, one bit each.
pub(super) fn prefix_bits(packed: u32) -> u16 {
    tokens_where(packed, |l| l == MatchLevel::Prefix)
}

/// The tokens a packed set of levels matches at all, one bit each.
pub(super) fn token_bits(packed: u32) -> u16 {
    tokens_where(packed, |l| l != MatchLevel::None)
}

/// Keeps, per token, the higher of the current level and the packed one.
pub(super) fn raise_levels(best: &mut [MatchLevel; MAX_QUERY_TOKENS], packed: u32, count: usize) {
    for (t, level) in best.iter_mut().take(count).enumerate() {
        *level = (*level).max(level_at(packed, t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_packs_and_unpacks_in_its_two_bits() {
        let levels = [
            MatchLevel::Exact,
            MatchLevel::None,
            MatchLevel::Contains,
            MatchLevel::Prefix,
        ];
        let packed = levels
            .iter()
            .enumerate()
            .fold(0, |packed, (t, level)| packed | level.packed_at(t));
        assert_eq!(packed, 0b10_01_00_11);
        for (t, &level) in levels.iter().enumerate() {
            assert_eq!(level_at(packed, t), level);
        }
        assert!(MatchLevel::Exact > MatchLevel::Prefix);
        assert!(MatchLevel::Prefix > MatchLevel::Contains);
        assert!(MatchLevel::Contains > MatchLevel::None);
    }
}
