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

/// Go's `time.ParseDuration`, step for step (golang/go `src/time/format.go`, commit
/// 08d2403576737c5735d0c1d356490e03a774dff6: `leadingInt`, `leadingFraction`, `ParseDuration`):
/// `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` or `0`, units ns, us, µs (U+00B5), μs (U+03BC), ms, s, m, h.
/// Integer parts that overflow are rejected; fraction digits beyond what fits in 63 bits are
/// ignored; the fraction is scaled in `f64` exactly as Go does, so a value rounds the same way;
/// the total may reach 2^63 only when negative. All arithmetic is checked: nothing wraps.
fn parse_go_duration(s: &str) -> Option<i128> {
    const LIMIT: u64 = 1 << 63;
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
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return None;
        }
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int = leading_int(&rest[..int_len])?;
        rest = &rest[int_len..];
        let (mut frac, mut scale, mut post) = (0u64, 1f64, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            (frac, scale) = leading_fraction(&after_dot[..frac_len]);
            post = frac_len > 0;
            rest = &after_dot[frac_len..];
        }
        if int_len == 0 && !post {
            return None;
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if int > LIMIT / unit {
            return None;
        }
        let mut value = int * unit;
        if frac > 0 {
            // At most 3.6e12 (an hour in nanoseconds): the cast cannot saturate.
            let part = (frac as f64 * (unit as f64 / scale)) as u64;
            value = value.checked_add(part).filter(|v| *v <= LIMIT)?;
        }
        total = total.checked_add(value).filter(|t| *t <= LIMIT)?;
    }
    if neg {
        Some(-(total as i128))
    } else if total > LIMIT - 1 {
        None
    } else {
        Some(total as i128)
    }
}

/// Go's `leadingInt`: the digits as a number no larger than 2^63, or overflow.
fn leading_int(digits: &str) -> Option<u64> {
    let mut x: u64 = 0;
    for c in digits.bytes() {
        if x > (1 << 63) / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > 1 << 63 {
            return None;
        }
    }
    Some(x)
}

/// Go's `leadingFraction`: digits that no longer fit are ignored (precision stops growing).
fn leading_fraction(digits: &str) -> (u64, f64) {
    let (mut x, mut scale) = (0u64, 1f64);
    for c in digits.bytes() {
        if x > ((1 << 63) - 1) / 10 {
            break;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > 1 << 63 {
            break;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale)
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
            ("2\u{3bc}s", 2_000),
            ("-0", 0),
            ("+0", 0),
            // Go's limits: 2^63-1 ns, and 2^63 ns only when negative.
            ("9223372036854775807ns", i64::MAX as i128),
            ("-9223372036854775808ns", i64::MIN as i128),
            ("2562047h47m16.854775807s", i64::MAX as i128),
            // Fraction digits beyond 63 bits are ignored, never wrapped.
            (
                "1.00000000000000000000000000000000000001h",
                3_600_000_000_000,
            ),
            // … and the float64 scaling rounds as Go's does.
            ("0.999999999999999999999999999999s", 1_000_000_000),
            // Go scales the fraction in float64: 0.1h is 360000000000 ns exactly.
            ("0.1h", 360_000_000_000),
            ("1.5m1.5s", 91_500_000_000),
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
            "9223372036854775808ns",
            "-9223372036854775809ns",
            "2562048h",
            "2562047h47m16.854775808s",
            "18446744073709551616ns",
            "99999999999999999999999999999999999999999s",
            "1.5.5s",
            "5S",
            "5M",
            "-.s",
            "+",
            "0.0",
            "00",
            " 5m",
            "5m ",
            "1e3s",
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
