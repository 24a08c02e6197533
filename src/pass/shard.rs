//! Sharding: several steppers (CronJobs, Lambda functions) split the promotions between them, each
//! taking those whose name hashes to its index. The hash is 64-bit FNV-1a of the name's UTF-8 bytes
//! (offset basis 0xcbf29ce484222325, prime 0x100000001b3), computed here by hand: the same name
//! lands in the same shard on every platform, Rust version and promoter release, unlike
//! `std::hash`, whose output may change between Rust versions.

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based, below `count`.
    pub index: u32,
    pub count: u32,
}

/// 64-bit FNV-1a.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Shard {
    /// Whether the promotion named `name` belongs to this shard.
    pub fn owns(&self, name: &str) -> bool {
        self.count <= 1 || fnv1a64(name.as_bytes()) % u64::from(self.count) == u64::from(self.index)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `INDEX/COUNT`, 0-based: `0/3`, `1/3`, `2/3`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected INDEX/COUNT, e.g. 0/3"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: INDEX {i:?} is not a number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: COUNT {n:?} is not a number"))?;
        if count == 0 {
            return Err(format!("{s:?}: COUNT must be at least 1"));
        }
        if index >= count {
            return Err(format!(
                "{s:?}: INDEX is 0-based and must be below COUNT ({count})"
            ));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo: draft-eastlake-fnv).
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn every_name_is_in_exactly_one_shard_and_shards_are_balanced() {
        let names: Vec<String> = (0..3000).map(|i| format!("team-{i}-rollout")).collect();
        for count in 1..=5u32 {
            let mut sizes = vec![0usize; count as usize];
            for n in &names {
                let owners: Vec<u32> = (0..count)
                    .filter(|&index| Shard { index, count }.owns(n))
                    .collect();
                assert_eq!(owners.len(), 1, "{n} in {owners:?} of {count}");
                sizes[owners[0] as usize] += 1;
            }
            let fair = names.len() / count as usize;
            assert!(
                sizes.iter().all(|s| s.abs_diff(fair) < fair / 5 + 10),
                "{count}: {sizes:?}"
            );
        }
    }

    #[test]
    fn parsing() {
        assert_eq!("1/3".parse::<Shard>(), Ok(Shard { index: 1, count: 3 }));
        assert!("3/3".parse::<Shard>().is_err());
        assert!("0/0".parse::<Shard>().is_err());
        assert!("1".parse::<Shard>().is_err());
        assert!("a/2".parse::<Shard>().is_err());
        assert_eq!(Shard { index: 0, count: 2 }.to_string(), "0/2");
    }
}
