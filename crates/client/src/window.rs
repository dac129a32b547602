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

use std::collections::VecDeque;
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

/// The credit a read stream keeps out (docs/streams.md): it starts at
/// [`STREAM_START`] and grows to the [`Window`] the stream measures, up to
/// a maximum; it never shrinks. Each grant is a probe: the server cannot
/// send a byte past what was granted before it until it has the grant, so
/// the first piece beyond that comes a round trip or more after the grant
/// went out.
#[derive(Debug)]
pub(crate) struct StreamCredit {
    window: Window,
    /// The credit kept out: granted and not yet consumed, plus consumed
    /// and not yet granted again.
    held: u64,
    /// Bytes consumed and not yet granted again.
    ungranted: u64,
    granted: u64,
    received: u64,
    /// Grants not yet used up: the credit granted in all up to each, and
    /// when it went. The oldest paid for the latest piece.
    grants: VecDeque<(u64, Sent)>,
}

/// The credit a read stream starts with, before anything is measured: twice
/// the bandwidth-delay product of a 1 GB/s link with a 67 ms round trip. A
/// smaller start costs a short transfer round trips spent growing it; a
/// reader that stops consuming holds at most this much.
pub(crate) const STREAM_START: u64 = 128 << 20;

/// Most grants not yet used up that [`StreamCredit`] keeps apart.
const MAX_GRANTS_KEPT: usize = 1024;

impl StreamCredit {
    /// A stream whose Tsread, granting [`StreamCredit::window`], goes at
    /// `now`; its credit grows up to `max`.
    pub fn new(max: u64, now: Instant) -> StreamCredit {
        let window = Window::new(STREAM_START.min(max), max);
        let credit = window.bytes();
        StreamCredit {
            grants: VecDeque::from([(credit, window.sent(now))]),
            window,
            held: credit,
            ungranted: 0,
            granted: credit,
            received: 0,
        }
    }

    /// The credit to keep out.
    pub fn window(&self) -> u64 {
        self.window.bytes()
    }

    /// A piece of `len` bytes came at `now` and was handed out.
    pub fn consumed(&mut self, len: u64, now: Instant) {
        while self.grants.len() > 1 && self.grants[0].0 <= self.received {
            self.grants.pop_front();
        }
        self.received += len;
        self.ungranted += len;
        self.window.delivered(self.grants[0].1, len, now);
    }

    /// The credit to grant now: what was consumed and what the window grew
    /// by, once that is half the window (the low water mark), or at once
    /// when the caller has nothing left to hand out (`idle`).
    pub fn due(&self, idle: bool) -> u64 {
        let due = self.ungranted + self.window.bytes().saturating_sub(self.held);
        if idle || due >= self.window.bytes() / 2 {
            due
        } else {
            0
        }
    }

    /// `credit` (as [`StreamCredit::due`] said) was granted at `now`.
    pub fn granted(&mut self, credit: u64, now: Instant) {
        self.held = self.held.max(self.window.bytes());
        self.ungranted = 0;
        self.granted += credit;
        // A server sending tiny pieces gets a grant for each: past a
        // thousand unused grants, a new one joins the latest instead, and
        // its pieces are timed from that. Coarser samples, but a record
        // that does not grow with the number of pieces.
        let full = self.grants.len() >= MAX_GRANTS_KEPT;
        match self.grants.back_mut() {
            Some(latest) if full => latest.0 = self.granted,
            _ => self.grants.push_back((self.granted, self.window.sent(now))),
        }
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

    /// Runs a read stream of `total` bytes over a link of `rate` bytes/s and
    /// `rtt`, to a server that keeps at most `server_window` of credit and
    /// sends `piece`-byte pieces; the client consumes each piece as it comes.
    /// Returns the credit at the end and the rate (bytes/s) of the second
    /// half of the transfer.
    fn stream(rate: f64, rtt: Duration, max: u64, server_window: u64, total: u64) -> (u64, f64) {
        let piece = 1 << 20;
        let half = rtt / 2;
        let start = Instant::now();
        let mut credit = StreamCredit::new(max, start);
        let mut server_credit = credit.window().min(server_window);
        let mut server_free = start + half;
        let (mut sent, mut got) = (0, 0);
        let mut to_client: VecDeque<(Instant, u64)> = VecDeque::new();
        let mut to_server: VecDeque<(Instant, u64)> = VecDeque::new();
        let mut halfway = None;
        loop {
            let can_send = server_credit > 0 && sent < total;
            let grant_at = to_server.front().map(|g| g.0);
            let arrive_at = to_client.front().map(|p| p.0);
            let earliest = [can_send.then_some(server_free), grant_at, arrive_at]
                .into_iter()
                .flatten()
                .min()
                .expect("the stream stalled");
            if grant_at == Some(earliest) {
                let (at, g) = to_server.pop_front().unwrap();
                server_credit = (server_credit + g).min(server_window);
                server_free = server_free.max(at);
            } else if can_send && server_free == earliest {
                let n = piece.min(server_credit).min(total - sent);
                server_credit -= n;
                sent += n;
                server_free += Duration::from_secs_f64(n as f64 / rate);
                to_client.push_back((server_free + half, n));
            } else {
                let (now, n) = to_client.pop_front().unwrap();
                credit.consumed(n, now);
                got += n;
                if got >= total / 2 && halfway.is_none() {
                    halfway = Some((now, got));
                }
                if got == total {
                    let (then, at) = halfway.unwrap();
                    let secs = now.duration_since(then).as_secs_f64();
                    return (credit.window(), (got - at) as f64 / secs);
                }
                let idle = to_client.front().is_none_or(|p| p.0 > now);
                for due in [credit.due(false), credit.due(idle)] {
                    if due > 0 {
                        credit.granted(due, now);
                        to_server.push_back((now + half, due));
                    }
                }
            }
        }
    }

    #[test]
    fn a_stream_grows_its_credit_to_fill_a_long_fat_link() {
        // A link whose bandwidth-delay product is three times the start.
        let rate = 1e9;
        let rtt = Duration::from_secs_f64(3.0 * STREAM_START as f64 / rate);
        let (window, got) = stream(rate, rtt, 4 << 30, 4 << 30, 16 << 30);
        let bdp = rate * rtt.as_secs_f64();
        assert!(
            window as f64 >= 1.5 * bdp && window as f64 <= 3.5 * bdp,
            "credit {window}, bandwidth-delay product {bdp}"
        );
        assert!(got >= 0.9 * rate, "{got} bytes/s of {rate}");
        // The same link with the credit fixed at the start is held to it.
        let (window, got) = stream(rate, rtt, STREAM_START, 1 << 30, 1 << 30);
        assert_eq!(window, STREAM_START);
        assert!(got < 0.5 * rate, "{got} bytes/s with a fixed credit");
    }

    #[test]
    fn a_stream_on_a_short_link_keeps_its_first_credit() {
        let (window, got) = stream(1e9, Duration::from_millis(1), 1 << 30, 1 << 30, 1 << 30);
        assert_eq!(window, STREAM_START);
        assert!(got >= 0.9e9, "{got} bytes/s");
    }

    #[test]
    fn a_stream_never_stalls_on_a_server_that_caps_its_credit() {
        // The server keeps a twentieth of what it is granted.
        let (_, got) = stream(1e9, Duration::from_millis(10), 64 << 20, 1 << 20, 256 << 20);
        assert!(got > 0.0);
    }

    #[test]
    fn one_byte_pieces_keep_a_bounded_record_of_grants() {
        // A server that sends one byte at a time, each consumed and granted
        // again at once (the reader is idle after each).
        let mut now = Instant::now();
        let mut credit = StreamCredit::new(STREAM_START, now);
        for _ in 0..100_000 {
            now += Duration::from_micros(10);
            credit.consumed(1, now);
            let due = credit.due(true);
            assert_eq!(due, 1);
            credit.granted(due, now);
        }
        assert!(
            credit.grants.len() <= MAX_GRANTS_KEPT,
            "{} grants kept",
            credit.grants.len()
        );
    }
}
