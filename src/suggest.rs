//! "did you mean": the existing name closest to one that does not exist, as git and cargo suggest
//! commands; only when it is within a typo's reach, never just some other name.

/// The candidate closest to `typed` (Damerau–Levenshtein: a swap of two letters is one edit), if
/// it is at most one edit per three characters away (at least one edit).
pub fn closest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (typed.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != typed)
        .map(|c| (strsim::damerau_levenshtein(typed, c), c))
        .filter(|(d, _)| *d <= limit)
        // Ties go to the first in alphabetical order, so that the hint does not vary.
        .min_by_key(|&(d, c)| (d, c))
        .map(|(_, c)| c)
}

/// `; did you mean "x"?` to end an error message, or nothing when no name is close.
pub fn did_you_mean<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(typed, candidates)
        .map(|c| format!("; did you mean {c:?}?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_matched_and_strangers_are_not() {
        let names = ["prod-rollout", "dev-rollout", "staging"];
        assert_eq!(closest("prod-rollot", names), Some("prod-rollout"));
        assert_eq!(closest("prdo-rollout", names), Some("prod-rollout"));
        assert_eq!(closest("stagin", names), Some("staging"));
        assert_eq!(closest("nope", names), None);
        assert_eq!(closest("prod", names), None);
        assert_eq!(closest("qa", ["dev", "prod"]), None);
        assert_eq!(
            closest("staging", names),
            None,
            "an exact name is no suggestion"
        );
        assert_eq!(did_you_mean("stagin", names), "; did you mean \"staging\"?");
        assert_eq!(did_you_mean("x", Vec::<&str>::new()), "");
    }
}
