//! Numbered conversations of a multiplexed device (Presotto §3.4):
//! opening `clone` takes the lowest free number.

use std::sync::{Arc, Weak};

use ninep_wire::Errno;
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The conversations of a device, by number. A conversation lives while
/// something holds it (its open files); its number is free again once the
/// last holder lets go, with nothing to release here.
#[derive(Debug)]
pub struct Conversations<T> {
    slots: Mutex<Vec<Weak<T>>>,
    max: usize,
}

impl<T> Conversations<T> {
    /// Room for at most `max` conversations at once.
    pub fn new(max: usize) -> Conversations<T> {
        Conversations {
            slots: Mutex::new(Vec::new()),
            max,
        }
    }

    /// A new conversation, `make` given its number, under the lowest free
    /// number; fails if all `max` are in use.
    pub fn alloc(&self, make: impl FnOnce(usize) -> T) -> Result<Arc<T>> {
        let mut slots = self.slots.lock();
        let n = match slots.iter().position(|s| s.strong_count() == 0) {
            Some(n) => n,
            None if slots.len() < self.max => {
                slots.push(Weak::new());
                slots.len() - 1
            }
            None => {
                return Err(Error::with_errno(
                    Errno::ENFILE,
                    format!("no free conversations (at most {})", self.max),
                ));
            }
        };
        let conv = Arc::new(make(n));
        slots[n] = Arc::downgrade(&conv);
        Ok(conv)
    }

    /// Conversation `n`, if it is alive.
    pub fn get(&self, n: usize) -> Option<Arc<T>> {
        self.slots.lock().get(n).and_then(Weak::upgrade)
    }

    /// The numbers of the conversations alive.
    pub fn live(&self) -> Vec<usize> {
        let slots = self.slots.lock();
        (0..slots.len())
            .filter(|&n| slots[n].strong_count() > 0)
            .collect()
    }
}
