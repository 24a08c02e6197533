//! Texts promoter records from what it does not control (Sveltos' failure messages, a check's
//! output, a list of clusters), cut to a bound before they reach a status field, a record
//! annotation or a report: the API server refuses an object whose annotations exceed 256 KiB
//! (kubernetes/apimachinery `pkg/api/validation/objectmeta.go`, `TotalAnnotationSizeLimitB`),
//! and one refused record patch would stop the promotion for good.

/// The longest recorded text, in bytes: a status field, a record's `why` or `reason` (room for a
/// health check's message, itself cut to 1 KiB, with the cluster and check it is about).
pub const RECORDED_TEXT_MAX: usize = 2048;
/// The longest Event note (events.k8s.io/v1 refuses a longer one).
pub const NOTE_MAX: usize = 1024;

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// `s` in at most `max` bytes: as it is when it fits, else a prefix followed by how much was cut
/// (`… (12345 more bytes)`), so nobody mistakes it for the whole message.
pub fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let longest_note = format!("… ({} more bytes)", s.len());
    if max < longest_note.len() {
        return prefix(s, max).to_string();
    }
    let keep = prefix(s, max - longest_note.len());
    format!("{keep}… ({} more bytes)", s.len() - keep.len())
}

/// [`bounded`] to [`RECORDED_TEXT_MAX`].
pub fn recorded(s: &str) -> String {
    bounded(s, RECORDED_TEXT_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_that_fits_is_kept_and_a_longer_one_says_what_was_cut() {
        assert_eq!(bounded("short", 10), "short");
        assert_eq!(bounded("", 0), "");
        let long = "é".repeat(3000);
        for max in [0, 1, 17, 100, 1024] {
            let b = bounded(&long, max);
            assert!(b.len() <= max, "{max}: {}", b.len());
            if max >= 100 {
                let kept = b.split('…').next().unwrap().len();
                assert!(
                    b.ends_with(&format!("… ({} more bytes)", long.len() - kept)),
                    "{b}"
                );
            }
        }
        assert_eq!(prefix("héllo", 2), "h");
        assert_eq!(recorded(&"x".repeat(5000)).len(), RECORDED_TEXT_MAX);
    }
}
