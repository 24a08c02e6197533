//! `metav1.Time` on the wire: RFC 3339 in UTC, truncated to whole seconds, as Go writes it.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A point in time as Kubernetes stores it (`2006-01-02T15:04:05Z`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    /// Truncates to whole seconds, as a `metav1.Time` round trip through the API server does.
    pub fn new(t: DateTime<Utc>) -> Self {
        let secs = t.timestamp();
        Timestamp(Utc.timestamp_opt(secs, 0).single().unwrap_or(t))
    }

    pub fn parse(s: &str) -> Result<Self, chrono::ParseError> {
        Ok(Timestamp::new(
            DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc),
        ))
    }

    pub fn as_datetime(&self) -> DateTime<Utc> {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Secs, true))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp::new(t)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s)
            .map_err(|e| serde::de::Error::custom(format!("invalid time {s:?}: {e}")))
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Time".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "date-time"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_go_format_and_truncates() {
        let t = Timestamp::parse("2026-02-16T06:28:24Z").unwrap();
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-02-16T06:28:24Z\""
        );
        let frac = Timestamp::parse("2026-02-16T06:28:24.987+01:00").unwrap();
        assert_eq!(frac.to_string(), "2026-02-16T05:28:24Z");
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
