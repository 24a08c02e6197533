//! Go's `time.ParseDuration` syntax, which `metav1.Duration` fields (`delay`) use on the wire.
//!
//! The original text is kept so that a manifest round-trips unchanged (`5m` stays `5m`, where Go
//! would rewrite it as `5m0s`).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoDuration {
    text: String,
    /// Signed: Go accepts negative durations; a negative delay behaves as no delay.
    nanos: i128,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?}")]
pub struct DurationError(pub String);

impl GoDuration {
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let nanos = parse_go_duration(text).ok_or_else(|| DurationError(text.to_string()))?;
        Ok(GoDuration {
            text: text.to_string(),
            nanos,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The duration, with negative values clamped to zero.
    pub fn to_std(&self) -> Duration {
        let n = self.nanos.max(0);
        Duration::new((n / 1_000_000_000) as u64, (n % 1_000_000_000) as u32)
    }

    pub fn to_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.to_std()).unwrap_or(chrono::Duration::MAX)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Go's grammar: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`; units ns, us, µs, μs, ms, s, m, h.
fn parse_go_duration(s: &str) -> Option<i128> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => return None,
        };
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().ok()?
        };
        let mut value = int.checked_mul(scale)?;
        if !frac_part.is_empty() {
            // Fractions beyond nanosecond precision are truncated, as Go does.
            let digits = &frac_part[..frac_part.len().min(18)];
            let frac: i128 = digits.parse().ok()?;
            value += frac * scale / 10i128.pow(digits.len() as u32);
        }
        total = total.checked_add(value)?;
        // Go rejects anything that overflows int64 nanoseconds.
        if total > i64::MAX as i128 {
            return None;
        }
    }
    Some(if neg { -total } else { total })
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        GoDuration::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_syntax() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("5m", 300_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("2us", 2_000),
            ("2µs", 2_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("-1m", -60_000_000_000),
            ("+2s", 2_000_000_000),
            (".5s", 500_000_000),
            ("5.s", 5_000_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(
                GoDuration::parse(text).map(|d| d.nanos),
                Ok(*nanos),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in [
            "",
            "5",
            "5x",
            "m",
            "1h 30m",
            "5 m",
            ".s",
            "-",
            "9999999999h",
            "1d",
        ] {
            assert!(
                GoDuration::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn keeps_text_and_clamps_negative() {
        let d: GoDuration = serde_json::from_str("\"5m\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"5m\"");
        assert_eq!(d.to_std(), Duration::from_secs(300));
        assert_eq!(GoDuration::parse("-5m").unwrap().to_std(), Duration::ZERO);
        let err = serde_json::from_str::<GoDuration>("\"5x\"").unwrap_err();
        assert!(err.to_string().contains("invalid duration \"5x\""), "{err}");
    }
}
