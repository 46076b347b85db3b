//! A tensor's moves through its states, as the books follow them: resident, offloading,
//! offloaded, fetching, evicted, lost (`Entry`'s `State`). Each transition keeps the books'
//! counts; one asked in a state it does not start from changes nothing and says so.

use burn_ir::TensorId;

use super::{HostCopy, Residency, State};

impl Residency {
    /// Resident → offloading (a copy to the host has started); `false` in any other state.
    pub fn begin_offload(&mut self, id: &TensorId) -> bool {
        match self.entries.get_mut(id) {
            Some(entry) if matches!(entry.state, State::Resident) => {
                entry.state = State::Offloading;
                self.books.offloading += entry.own();
                true
            }
            _ => false,
        }
    }

    /// Offloading → resident: the copy failed, or the op about to run needs the tensor.
    pub fn cancel_offload(&mut self, id: &TensorId) -> bool {
        match self.entries.get_mut(id) {
            Some(entry) if matches!(entry.state, State::Offloading) => {
                entry.state = State::Resident;
                self.books.offloading -= entry.own();
                true
            }
            _ => false,
        }
    }

    /// Offloading (or resident, for a copy made on the op's thread) → offloaded: the device
    /// copy may go; `copy` holds the bytes. Gives the copy back in any other state.
    pub fn complete_offload(&mut self, id: &TensorId, copy: HostCopy) -> Result<(), HostCopy> {
        let Some(entry) = self.entries.get_mut(id) else {
            return Err(copy);
        };
        match entry.state {
            State::Offloading => self.books.offloading -= entry.own(),
            State::Resident => {}
            _ => return Err(copy),
        }
        self.books.add_host(&copy);
        entry.state = State::Offloaded(Box::new(copy));
        self.leave_device(id);
        Ok(())
    }

    /// Offloaded → fetching: the host copy is handed to the caller (a worker or the op's
    /// thread), the device bytes are counted from now on. `None` in any other state.
    pub fn begin_fetch(&mut self, id: &TensorId) -> Option<Box<HostCopy>> {
        let entry = self.entries.get_mut(id)?;
        if !matches!(entry.state, State::Offloaded(_)) {
            return None;
        }
        let State::Offloaded(copy) = core::mem::replace(&mut entry.state, State::Fetching) else {
            return None;
        };
        self.books.remove_host(&copy);
        self.books.add_resident(entry.bytes);
        Some(copy)
    }

    /// Fetching → offloaded again, with the copy given back (the fetch could not start).
    pub fn restore_fetch(&mut self, id: &TensorId, copy: HostCopy) {
        if let Some(entry) = self.entries.get_mut(id)
            && matches!(entry.state, State::Fetching)
        {
            self.books.resident -= entry.bytes;
            self.books.add_host(&copy);
            entry.state = State::Offloaded(Box::new(copy));
        }
    }

    /// Fetching → resident: the bytes are on the device under the tensor's id.
    pub fn complete_fetch(&mut self, id: &TensorId) -> bool {
        match self.entries.get_mut(id) {
            Some(entry) if matches!(entry.state, State::Fetching) => {
                entry.state = State::Resident;
                true
            }
            _ => false,
        }
    }

    /// Fetching → evicted when it has a recipe (it is recomputed at its next use), else lost:
    /// the fetch failed and took the bytes with it.
    pub fn fail_fetch(&mut self, id: &TensorId) {
        if let Some(entry) = self.entries.get_mut(id)
            && matches!(entry.state, State::Fetching)
        {
            self.books.resident -= entry.bytes;
            entry.state = if entry.recipe.is_some() {
                State::Evicted
            } else {
                State::Lost
            };
        }
    }

    /// Resident with a recipe → evicted: the device copy may go. `false` otherwise.
    pub fn evict(&mut self, id: &TensorId) -> bool {
        match self.entries.get_mut(id) {
            Some(entry) if matches!(entry.state, State::Resident) && entry.recipe.is_some() => {
                entry.state = State::Evicted;
                self.leave_device(id);
                true
            }
            _ => false,
        }
    }

    /// Resident → evicted, with no recipe: a holder of a shared buffer whose carrier takes the
    /// buffer off the device ([`Group`]). `false` in any other state.
    pub fn park(&mut self, id: &TensorId) -> bool {
        match self.entries.get_mut(id) {
            Some(entry) if matches!(entry.state, State::Resident) => {
                entry.state = State::Evicted;
                self.leave_device(id);
                true
            }
            _ => false,
        }
    }

    /// Evicted → resident: its recipe was replayed.
    pub fn rematerialise(&mut self, id: &TensorId) -> bool {
        match self.entries.get_mut(id) {
            Some(entry) if matches!(entry.state, State::Evicted) => {
                entry.state = State::Resident;
                self.books.add_resident(entry.bytes);
                true
            }
            _ => false,
        }
    }
}
