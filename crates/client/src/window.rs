//! How many bytes a bulk transfer keeps in flight: twice the link's
//! bandwidth-delay product, as the transfer itself measures it.
//!
//! Each reply gives two samples: a round-trip time (request sent to reply
//! received) and a delivery rate (bytes delivered between the two, over that
//! time). The window is `2 × max rate × min RTT`, within fixed bounds. While
//! the window is the limit, the rate measured is `window / RTT`, so the
//! window doubles every round trip, as TCP's slow start does; once the link
//! (or the consumer) is the limit the rate stops growing and the window
//! settles. Rates are remembered for a few round trips only, so a transfer
//! that slows down (a slow consumer, a busy server) gets a smaller window.

use std::time::{Duration, Instant};

/// Rates older than this many round trips are forgotten.
const MEMORY_RTTS: u32 = 8;
/// ... but kept at least this long, so that loopback's microsecond round
/// trips do not make the estimate jitter.
const MIN_MEMORY: Duration = Duration::from_millis(20);

/// The in-flight window of one transfer.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    min: u64,
    max: u64,
    bytes: u64,
    /// Bytes delivered so far.
    delivered: u64,
    min_rtt: Option<Duration>,
    /// Largest rate (bytes/s) seen in this period and in the one before.
    rate_now: f64,
    rate_before: f64,
    period_start: Option<Instant>,
}

/// When a request left, for the samples its reply gives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    at: Instant,
    delivered: u64,
}

impl Window {
    /// A window of `min` bytes to start with, grown up to `max`.
    pub fn new(min: u64, max: u64) -> Window {
        let max = max.max(min);
        Window {
            min,
            max,
            bytes: min,
            delivered: 0,
            min_rtt: None,
            rate_now: 0.0,
            rate_before: 0.0,
            period_start: None,
        }
    }

    /// A window that never changes: `bytes` (one request at a time, say).
    pub fn fixed(bytes: u64) -> Window {
        Window::new(bytes, bytes)
    }

    /// The bytes that may be in flight now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn sent(&self, now: Instant) -> Sent {
        Sent {
            at: now,
            delivered: self.delivered,
        }
    }

    /// A reply to the request sent at `sent` brought (or acknowledged)
    /// `bytes`.
    pub fn delivered(&mut self, sent: Sent, bytes: u64, now: Instant) {
        self.delivered += bytes;
        let rtt = now.saturating_duration_since(sent.at);
        if rtt.is_zero() {
            return;
        }
        let min_rtt = self.min_rtt.map_or(rtt, |m| m.min(rtt));
        self.min_rtt = Some(min_rtt);
        let memory = (min_rtt * MEMORY_RTTS).max(MIN_MEMORY);
        match self.period_start {
            Some(start) if now.saturating_duration_since(start) < memory => {}
            _ => {
                self.rate_before = self.rate_now;
                self.rate_now = 0.0;
                self.period_start = Some(now);
            }
        }
        let rate = (self.delivered - sent.delivered) as f64 / rtt.as_secs_f64();
        self.rate_now = self.rate_now.max(rate);
        let rate = self.rate_now.max(self.rate_before);
        let bdp = rate * min_rtt.as_secs_f64();
        self.bytes = ((2.0 * bdp) as u64).clamp(self.min, self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a window against a link of `rate` bytes/s and `rtt`, sending
    /// `chunk`-byte requests whenever the window allows, for `rounds` round
    /// trips from `now`; returns the window at the end.
    fn simulate(
        w: &mut Window,
        now: &mut Instant,
        rate: f64,
        rtt: Duration,
        chunk: u64,
        rounds: u32,
    ) -> u64 {
        let start = *now;
        let mut inflight: std::collections::VecDeque<(Sent, Instant)> = Default::default();
        let mut link_free = *now;
        let per_chunk = Duration::from_secs_f64(chunk as f64 / rate);
        while *now < start + rtt * rounds {
            while (inflight.len() as u64 + 1) * chunk <= w.bytes().max(chunk) {
                // A reply arrives a round trip after it is sent, and no
                // sooner than the link can carry it after the one before.
                let done = (*now + rtt).max(link_free + per_chunk);
                link_free = done;
                inflight.push_back((w.sent(*now), done));
            }
            let (sent, done) = inflight.pop_front().expect("something in flight");
            *now = done;
            w.delivered(sent, chunk, *now);
        }
        w.bytes()
    }

    #[test]
    fn grows_to_twice_the_bandwidth_delay_product() {
        let chunk = 1 << 20;
        let mut w = Window::new(4 * chunk, 1 << 30);
        let rtt = Duration::from_millis(50);
        let rate = 100e6;
        let got = simulate(&mut w, &mut Instant::now(), rate, rtt, chunk, 100);
        let bdp = rate * 0.05;
        assert!(
            got as f64 >= 1.5 * bdp && got as f64 <= 3.5 * bdp,
            "window {got}, bandwidth-delay product {bdp}"
        );
    }

    #[test]
    fn stays_within_bounds() {
        let chunk = 1 << 20;
        let mut w = Window::new(4 * chunk, 16 * chunk);
        let got = simulate(
            &mut w,
            &mut Instant::now(),
            1e9,
            Duration::from_millis(100),
            chunk,
            50,
        );
        assert_eq!(got, 16 * chunk);
        let mut w = Window::new(4 * chunk, 1 << 30);
        let got = simulate(
            &mut w,
            &mut Instant::now(),
            1e6,
            Duration::from_micros(50),
            chunk,
            200,
        );
        assert_eq!(got, 4 * chunk);
    }

    #[test]
    fn shrinks_when_the_rate_falls() {
        let chunk = 1 << 16;
        let mut w = Window::new(chunk, 1 << 30);
        let rtt = Duration::from_millis(10);
        let mut now = Instant::now();
        let high = simulate(&mut w, &mut now, 1e9, rtt, chunk, 200);
        let low = simulate(&mut w, &mut now, 1e7, rtt, chunk, 400);
        assert!(low * 4 < high, "window went from {high} to only {low}");
    }

    #[test]
    fn a_fixed_window_stays_fixed() {
        let mut w = Window::fixed(8192);
        assert_eq!(
            simulate(
                &mut w,
                &mut Instant::now(),
                1e9,
                Duration::from_millis(1),
                8192,
                10
            ),
            8192
        );
    }
}
