//! What one caller may ask of the API (SPEC §13: bounded like `/mcp`):
//! a token bucket per API token, so that one script polling in a loop
//! cannot take the server from everyone else.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::error::ApiError;

/// Requests per second one token may make on average.
pub const DEFAULT_RATE: u32 = 50;
/// Requests one token may make at once after being idle.
pub const DEFAULT_BURST: u32 = 200;
/// Tokens whose buckets are kept; past it the map starts over (a bucket
/// is only a few bytes, and a full one is what a new token gets anyway).
const MAX_BUCKETS: usize = 10_000;

pub struct RateLimits {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimits {
    pub fn new(per_second: u32, burst: u32) -> Self {
        RateLimits {
            per_second: f64::from(per_second.max(1)),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `key`'s bucket, or says when to retry.
    pub fn admit(&self, key: &str) -> Result<(), ApiError> {
        let Ok(mut buckets) = self.buckets.lock() else {
            return Ok(());
        };
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            buckets.clear();
        }
        let now = Instant::now();
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let refilled = now.duration_since(bucket.at).as_secs_f64() * self.per_second;
        bucket.tokens = (bucket.tokens + refilled).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - bucket.tokens) / self.per_second).ceil() as u64;
            Err(ApiError::rate_limited(wait))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_its_burst_then_waits_and_others_are_not_held_up() {
        let limits = RateLimits::new(1, 3);
        for _ in 0..3 {
            assert!(limits.admit("a").is_ok());
        }
        assert!(limits.admit("a").is_err(), "the fourth at once is refused");
        assert!(
            limits.admit("b").is_ok(),
            "another token has its own bucket"
        );
    }
}
