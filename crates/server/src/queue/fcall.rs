//! The `fcall` module: cuts the bytes coming up a stream into whole 9P
//! messages, one delimited block each, so that a conversation's `data`
//! file can carry a 9P session (Plan 9 pushed this on a TCP stream before
//! mounting it). Going down, writes are already whole messages.

use bytes::{Buf, BytesMut};
use ninep_wire::Errno;

use super::{Block, Module};
use crate::error::{Error, Result};

/// The smallest 9P message: size[4] type[1] tag[2].
const MIN_MESSAGE: usize = 7;

/// The `fcall` module; see the module documentation.
#[derive(Debug)]
pub struct Fcall {
    /// Bytes of a message not yet whole.
    partial: BytesMut,
    /// Largest message passed.
    max: usize,
}

impl Default for Fcall {
    /// Messages of up to 8 MiB, the largest msize ninep offers.
    fn default() -> Fcall {
        Fcall::new(8 << 20)
    }
}

impl Fcall {
    /// Passes messages of up to `max` bytes.
    pub fn new(max: usize) -> Fcall {
        Fcall {
            partial: BytesMut::new(),
            max,
        }
    }
}

impl Module for Fcall {
    fn up(&mut self, block: Block, out: &mut Vec<Block>) -> Result<()> {
        self.partial.extend_from_slice(&block.data);
        while self.partial.len() >= 4 {
            let size = (&self.partial[..4]).get_u32_le() as usize;
            if !(MIN_MESSAGE..=self.max).contains(&size) {
                return Err(Error::with_errno(
                    Errno::EPROTO,
                    format!("fcall: bad message size {size}"),
                ));
            }
            if self.partial.len() < size {
                break;
            }
            out.push(Block::delimited(self.partial.split_to(size).freeze()));
        }
        Ok(())
    }

    fn drain(&mut self) -> Option<Block> {
        let rest = self.partial.split().freeze();
        (!rest.is_empty()).then(|| Block::delimited(rest))
    }
}
