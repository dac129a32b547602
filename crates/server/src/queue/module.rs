//! Processing modules: what `push NAME` puts on a stream.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Block;
use super::fcall::Fcall;
use crate::error::Result;

/// A processing module: an instance sits on one stream, seeing the blocks
/// that go down it (towards the device) and up it (towards the reader).
/// Its procedures run in the writer's context, as Plan 9's put procedures
/// run in a process; flow control happens at the queues around them.
pub trait Module: Send + std::fmt::Debug {
    /// A block on its way down; what to pass on goes to `out`.
    fn down(&mut self, block: Block, out: &mut Vec<Block>) -> Result<()> {
        out.push(block);
        Ok(())
    }

    /// A block on its way up; what to pass on goes to `out`.
    fn up(&mut self, block: Block, out: &mut Vec<Block>) -> Result<()> {
        out.push(block);
        Ok(())
    }

    /// A ctl message: `None` if it is not this module's, to pass it on.
    fn ctl(&mut self, _msg: &str) -> Option<Result<()>> {
        None
    }

    /// Data held back when the module is popped, to pass up.
    fn drain(&mut self) -> Option<Block> {
        None
    }
}

type Make = Arc<dyn Fn() -> Box<dyn Module> + Send + Sync>;

/// The modules a stream's `push` may name.
#[derive(Clone)]
pub struct Modules {
    make: BTreeMap<String, Make>,
}

impl std::fmt::Debug for Modules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.make.keys()).finish()
    }
}

impl Default for Modules {
    /// The standard modules: `fcall`, which delimits 9P messages.
    fn default() -> Modules {
        Modules {
            make: BTreeMap::new(),
        }
        .with("fcall", || Box::new(Fcall::default()))
    }
}

impl Modules {
    /// Adds module `name`, made by `make` for each push.
    pub fn with(
        mut self,
        name: &str,
        make: impl Fn() -> Box<dyn Module> + Send + Sync + 'static,
    ) -> Modules {
        self.make.insert(name.to_owned(), Arc::new(make));
        self
    }

    /// A new instance of module `name`, if there is one.
    pub fn make(&self, name: &str) -> Option<Box<dyn Module>> {
        self.make.get(name).map(|make| make())
    }
}
