//! A latency histogram of fixed size: log-linear buckets, each under 1% wide
//! relative to its values, so that recording costs an add and histograms of
//! many connections merge by adding their counts.

use std::time::Duration;

/// Values below `2^SUB_BITS` nanoseconds get a bucket each; above, every
/// power of two is split into `2^(SUB_BITS-1)` buckets.
const SUB_BITS: u32 = 7;
const HALF: usize = 1 << (SUB_BITS - 1);
const BUCKETS: usize = (64 - SUB_BITS as usize + 2) * HALF;

/// Counts of durations, in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.total)
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn index(ns: u64) -> usize {
    if ns < 1 << SUB_BITS {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let shift = msb + 1 - SUB_BITS;
    shift as usize * HALF + (ns >> shift) as usize
}

/// The middle of bucket `i`.
fn value(i: usize) -> u64 {
    if i < 1 << SUB_BITS {
        return i as u64;
    }
    let shift = i / HALF - 1;
    let mantissa = (i - shift * HALF) as u64;
    (mantissa << shift) + (1u64 << shift) / 2
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }

    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[index(ns)] += 1;
        self.total += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds every count of `other` to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    pub fn mean(&self) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum_ns / u128::from(self.total)) as u64)
    }

    /// The smallest recorded duration that `q` (0 to 1) of all are at most,
    /// to within its bucket; zero when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_nanos(value(i).min(self.max_ns));
            }
        }
        self.max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_narrow() {
        let mut last = 0;
        for ns in (0..1_000_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = index(ns);
            assert!(i >= last && i < BUCKETS, "{ns}");
            last = i;
            let v = value(i);
            let err = v.abs_diff(ns) as f64 / (ns.max(1)) as f64;
            assert!(err < 0.01, "{ns} -> bucket {i} reads {v}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let close = |d: Duration, us: f64| (d.as_secs_f64() * 1e6 - us).abs() / us < 0.01;
        assert!(close(h.quantile(0.5), 500.0), "{:?}", h.quantile(0.5));
        assert!(close(h.quantile(0.99), 990.0), "{:?}", h.quantile(0.99));
        assert_eq!(h.max(), Duration::from_micros(1000));
        let mut m = Histogram::new();
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.count(), 2000);
        assert_eq!(m.quantile(0.5), h.quantile(0.5));
        assert_eq!(Histogram::new().quantile(0.5), Duration::ZERO);
    }
}
