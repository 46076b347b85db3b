//! Where each tensor of a device is: the residency table, its state machine and its books.
//!
//! Every tensor is in one state (peer offload's four states, plus recomputation): [`State`]. A state
//! changes only through the transition methods of [`Residency`], which keep the books
//! ([`Books`]: resident, host and in-flight bytes, and their peaks) consistent by
//! construction; the engine never edits a count by hand. The transitions:
//!
//! ```text
//!            begin_offload            complete_offload
//! Resident ───────────────▶ Offloading ───────────────▶ Offloaded ──begin_fetch──▶ Fetching
//!    ▲  ▲ ◀─────────────────    │ cancel_offload           ▲  ◀──restore_fetch──     │  │
//!    │  │                       └──(offload_here: Resident ─┘ directly)             │  │
//!    │  └──────────────────────────────── complete_fetch ◀────────────────────────────┘  │
//!    │ rematerialise                                               fail_fetch ──────────┘
//!    │                                                         (to Evicted with a recipe,
//! Evicted ◀── evict (with a recipe)                              else Lost)
//! ```
//!
//! `admit` puts a new tensor in the books as resident; `remove` takes one out in any state.
//!
//! **Buffers, not tensors.** A view (a transposed, sliced, expanded or reshaped tensor) shares
//! the device buffer of the tensor it was made from. [`Residency::share`] puts tensors that
//! share a buffer in one *shared buffer*, whose bytes are counted once, for as long as one of
//! them holds it on the device; each of them counts nothing of its own. A tensor leaves its
//! shared buffer when it leaves the device (offloaded, evicted, removed): a fetch or a
//! recomputation makes it a buffer of its own again, until the engine sees it share one.

mod books;
mod entry;
mod host_copy;
mod recipes;
mod shared_buffers;
mod transitions;
mod views;

use burn_backend::{DType, Shape};
use burn_ir::TensorId;
use hashbrown::HashMap;

use crate::error::SwapError;

pub(crate) use super::dims::Dims;
pub(crate) use books::Books;
pub(crate) use entry::{Entry, Group, Recipe, Remake, State};
pub(crate) use host_copy::HostCopy;
pub(crate) use views::ViewBooks;

/// What [`Residency::remove_parts`] leaves of an entry.
pub(crate) struct Removed {
    pub recipe: Option<Box<Recipe>>,
    pub group: Option<Box<Group>>,
    /// Whether the device held its bytes.
    pub on_device: bool,
}

/// What [`Residency::remove_unless_pinned`] did with a tensor Burn is done with.
pub(crate) enum LetGo {
    /// It left the books.
    Removed(Removed),
    /// A recipe still reads it: it stays, as an orphan, having given up its own recipe (whose
    /// inputs the caller unpins) unless it is evicted.
    Orphaned(Option<Box<Recipe>>),
    /// It was not in the books.
    Absent,
}

/// A device buffer that several tensors view: counted once, while one of them holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharedBuffer {
    /// What the backend calls it (an address or an id), unique while it lives.
    pub key: usize,
    /// Its size on the device.
    pub bytes: u64,
    /// The tensors on the device that hold it.
    pub holders: u32,
    /// The buffer of the unwrapped run its holders share (see [`Entry`]'s `origin`).
    pub origin: u32,
}
/// Every live tensor of a device, by id, and the books they add up to.
#[derive(Default)]
pub(crate) struct Residency {
    entries: HashMap<TensorId, Entry>,
    books: Books,
    /// The shared buffers, by number (from 1).
    buffers: HashMap<u32, SharedBuffer>,
    last_buffer: u32,
    /// How many tensors in the books share each buffer of the unwrapped run ([`Entry`]'s
    /// `origin`), by number (from 1).
    origins: HashMap<u32, u32>,
    last_origin: u32,
    /// How many entries a recipe pins: with none, an op that consumes its inputs need not
    /// look each of them up to ask.
    pinned: usize,
    /// The strided views and what they were made from (outside the books: no bytes).
    pub views: ViewBooks,
}

impl Residency {
    pub fn get(&self, id: &TensorId) -> Option<&Entry> {
        self.entries.get(id)
    }

    /// The entry, for the fields outside the books (recipe, pins, layout, last use).
    pub fn get_mut(&mut self, id: &TensorId) -> Option<&mut Entry> {
        self.entries.get_mut(id)
    }

    /// How many tensors are in the books.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every live tensor.
    pub fn iter(&self) -> impl Iterator<Item = (&TensorId, &Entry)> {
        self.entries.iter()
    }

    /// The books.
    pub fn books(&self) -> &Books {
        &self.books
    }

    /// Whether host memory can take `bytes` more under `host_budget` (the configured host
    /// budget; `None` is unlimited), counting the offloads in flight at their full size.
    #[inline]
    pub fn host_has_room(&self, host_budget: Option<u64>, bytes: u64) -> bool {
        let books = self.books();
        host_budget.is_none_or(|budget| books.host + books.offloading + bytes <= budget)
    }

    /// The error of an offload of `id` (`bytes`) that the host budget refuses.
    pub fn host_full_for(
        &self,
        id: TensorId,
        bytes: u64,
        host_budget: Option<u64>,
        budget: Option<u64>,
    ) -> SwapError {
        let books = self.books();
        SwapError::HostFull {
            tensor: id.value(),
            bytes,
            host: books.host + books.offloading,
            host_budget: host_budget.unwrap_or(u64::MAX),
            budget: budget.unwrap_or(u64::MAX),
            resident: books.resident,
        }
    }

    /// A shared buffer, by number.
    pub fn buffer(&self, buffer: u32) -> Option<&SharedBuffer> {
        self.buffers.get(&buffer)
    }

    /// Whether any tensor shares its buffer (the room-maker then frees buffers, not tensors).
    pub fn any_shared(&self) -> bool {
        !self.buffers.is_empty()
    }

    /// The device bytes an entry accounts for when it is the only one counted: its shared
    /// buffer's, or its own.
    pub fn counted(&self, entry: &Entry) -> u64 {
        match entry.shared() {
            Some(b) => self.buffers.get(&b).map_or(0, |s| s.bytes),
            None => entry.bytes,
        }
    }

    /// Notes `bytes` resident at once for the peak (an op running).
    #[inline]
    pub fn note_peak(&mut self, bytes: u64) {
        self.books.note_peak(bytes);
    }

    /// Starts a new measurement of the peaks.
    pub fn reset_peaks(&mut self) {
        self.books.reset_peaks();
    }

    /// Counts `bytes` on the device for device work outside the tensors (the link probe's
    /// temporaries) until [`Residency::take_back`] is called with them.
    pub fn lend(&mut self, bytes: u64) {
        self.books.add_resident(bytes);
        self.books.lent += bytes;
    }

    /// Takes back `bytes` that [`Residency::lend`] counted: that work is over.
    pub fn take_back(&mut self, bytes: u64) {
        let bytes = bytes.min(self.books.lent);
        self.books.lent -= bytes;
        self.books.resident -= bytes;
    }

    /// A tensor new in the books, resident, of `shape` and `dtype`, used at op `now` (one
    /// made from data or arriving from another device).
    pub fn admit_resident(&mut self, id: TensorId, shape: &Shape, dtype: DType, now: u64) {
        self.admit(
            id,
            Entry::new(Dims::from_slice(shape.as_slice()), dtype, now),
        );
    }

    /// A new tensor, resident. Replaces (and removes) an entry of the same id.
    #[inline]
    pub fn admit(&mut self, id: TensorId, entry: Entry) {
        debug_assert!(matches!(entry.state, State::Resident));
        self.books.add_resident(entry.bytes);
        if entry.origin != 0 {
            *self.origins.entry(entry.origin).or_default() += 1;
        }
        debug_assert_eq!(entry.pins, 0, "an entry is admitted unpinned");
        if let Some(old) = self.entries.insert(id, entry) {
            self.unbook(&old);
            self.leave_origin(old.origin);
        }
    }

    /// Takes a tensor out of the books, whatever its state.
    #[inline]
    pub fn remove(&mut self, id: &TensorId) -> Option<Entry> {
        let entry = self.entries.remove(id)?;
        self.unbook(&entry);
        self.leave_origin(entry.origin);
        Some(entry)
    }

    /// [`Residency::remove`] for a caller that needs only what the entry leaves behind:
    /// its recipe and group (to let go of) and whether the device held it. The entry is
    /// dropped here rather than moved out through the callers (each move of its 120 bytes is
    /// a copy, on the path of every op that consumes a tensor).
    #[inline]
    pub fn remove_parts(&mut self, id: &TensorId) -> Option<Removed> {
        // Not through `remove`: its return moves the entry once more (measured).
        let entry = self.entries.remove(id)?;
        Some(self.settle(entry))
    }

    /// Takes an entry that left the table off the books, keeping what it leaves behind.
    #[inline]
    fn settle(&mut self, mut entry: Entry) -> Removed {
        self.unbook(&entry);
        self.leave_origin(entry.origin);
        Removed {
            recipe: entry.recipe.take(),
            group: entry.take_group(),
            on_device: entry.state.on_device(),
        }
    }

    /// Burn is done with `id`: an entry a recipe still pins stays in the books as an orphan,
    /// holding no buffer of the unwrapped run (which would have dropped it); any other leaves
    /// them as [`Residency::remove_parts`] takes it. One lookup, on the path of every op that
    /// consumes a tensor.
    ///
    /// An orphan that the device or the host holds gives up its own way back (its recipe and
    /// the op its view was made by), which the caller releases: Burn never asks for it again,
    /// and what still reads it reads it where it is. Kept, each step's orphan would pin the
    /// step before's: a value updated through strided ops (an optimizer's state on a backend
    /// that keeps a view's layout) would hold its whole history. Only an evicted orphan keeps
    /// its recipe, which is how it comes back.
    #[inline]
    pub fn remove_unless_pinned(&mut self, id: &TensorId) -> LetGo {
        match self.entries.entry(*id) {
            hashbrown::hash_map::Entry::Occupied(slot) if slot.get().pins > 0 => {
                let entry = slot.into_mut();
                entry.orphan = true;
                let origin = std::mem::take(&mut entry.origin);
                let gives_up = !matches!(entry.state, State::Evicted);
                let recipe = if gives_up {
                    entry.set_view_op(None);
                    entry.recipe.take()
                } else {
                    None
                };
                self.leave_origin(origin);
                LetGo::Orphaned(recipe)
            }
            hashbrown::hash_map::Entry::Occupied(slot) => {
                let entry = slot.remove();
                LetGo::Removed(self.settle(entry))
            }
            hashbrown::hash_map::Entry::Vacant(_) => LetGo::Absent,
        }
    }

    /// Takes an entry that left the table off the books.
    #[inline]
    fn unbook(&mut self, entry: &Entry) {
        if entry.pins > 0 {
            self.pinned -= 1;
        }
        match &entry.state {
            State::Offloaded(copy) => self.books.remove_host(copy),
            State::Evicted | State::Lost => {}
            State::Offloading => {
                self.books.offloading -= entry.own();
                self.books.resident -= entry.own();
            }
            State::Resident | State::Fetching => self.books.resident -= entry.own(),
        }
        self.release_buffer(entry.buffer);
    }

    /// One holder less for `buffer` (0: none); its bytes leave the books with the last one.
    fn release_buffer(&mut self, buffer: u32) {
        if buffer == 0 {
            return;
        }
        if let Some(shared) = self.buffers.get_mut(&buffer) {
            shared.holders -= 1;
            if shared.holders == 0 {
                self.books.resident -= shared.bytes;
                self.buffers.remove(&buffer);
            }
        }
    }

    /// The entry leaves the device: it stops holding its shared buffer, and its own bytes
    /// (if it had any) leave the resident count.
    fn leave_device(&mut self, id: &TensorId) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let (own, buffer) = (entry.own(), entry.buffer);
        entry.buffer = 0;
        self.books.resident -= own;
        self.release_buffer(buffer);
    }

    /// The device says `view` (resident) lives in the buffer it names `key`, `buffer_bytes`
    /// long, which `source` (resident) holds too, or no tensor in the books when `source` is
    /// `None` (the one it was made from is gone, or was itself a view): from now on that
    /// buffer is counted once, for as long as one tensor holds it. A shared buffer of that
    /// key in the books already is the one joined. Returns the change in resident bytes
    /// (negative: bytes that were counted twice). Nothing changes when either tensor is not
    /// resident.
    pub fn share(
        &mut self,
        view: &TensorId,
        source: Option<&TensorId>,
        key: usize,
        buffer_bytes: u64,
    ) -> i64 {
        let resident = |r: &Self, id: &TensorId| {
            r.entries
                .get(id)
                .is_some_and(|e| matches!(e.state, State::Resident))
        };
        if !resident(self, view) || source.is_some_and(|s| s == view || !resident(self, s)) {
            return 0;
        }
        let before = self.books.resident as i64;
        let known = self
            .buffers
            .iter()
            .find(|(_, shared)| shared.key == key)
            .map(|(b, _)| *b);
        let buffer = match known {
            Some(buffer) => buffer,
            None => self.new_buffer(key, buffer_bytes),
        };
        for id in [Some(view), source].into_iter().flatten() {
            if self.entries.get(id).map(|e| e.buffer) != Some(buffer) {
                self.release_view(id);
                self.hold(id, buffer);
            }
        }
        // The buffer of the unwrapped run they share: the one its holders knew already.
        let known = self
            .buffers
            .get(&buffer)
            .map(|s| s.origin)
            .into_iter()
            .chain(
                [Some(view), source]
                    .into_iter()
                    .flatten()
                    .filter_map(|id| self.entries.get(id))
                    .map(|e| e.origin),
            )
            .find(|&o| o != 0);
        let origin = match known {
            Some(origin) => origin,
            None => {
                self.last_origin = self.last_origin.wrapping_add(1).max(1);
                self.last_origin
            }
        };
        if let Some(shared) = self.buffers.get_mut(&buffer) {
            shared.origin = origin;
        }
        for id in [Some(view), source].into_iter().flatten() {
            self.set_origin(id, origin);
        }
        self.books.note_peak(self.books.resident);
        self.books.resident as i64 - before
    }

    /// [`Residency::admit`] of a view that [`Residency::share`]s a buffer at once: its own
    /// bytes never count, not even towards the peak.
    pub fn admit_view(
        &mut self,
        id: TensorId,
        entry: Entry,
        source: Option<&TensorId>,
        key: usize,
        buffer_bytes: u64,
    ) {
        let peak = self.books.peak;
        self.admit(id, entry);
        self.books.peak = peak;
        self.share(&id, source, key, buffer_bytes);
    }

    /// Takes back what the peak noted since it was `peak`, but for what is resident now: a
    /// view made again counted its own bytes until it was seen to share its source's buffer.
    pub fn restore_peak(&mut self, peak: u64) {
        self.books.peak = peak.max(self.books.resident);
    }

    /// Whether any tensor in the books shares a buffer of the unwrapped run (else no op
    /// needs to ask [`Residency::shares_origin`]).
    #[inline]
    pub fn any_origin(&self) -> bool {
        !self.origins.is_empty()
    }

    /// Whether `id` shares its buffer, in the unwrapped run, with another tensor in the books
    /// (whichever of them is on the device now): an op consuming it must not write into it
    /// in place, as the unwrapped backend would not (it holds a buffer another tensor holds).
    pub fn shares_origin(&self, id: &TensorId) -> bool {
        self.entries
            .get(id)
            .is_some_and(|e| e.origin != 0 && self.origins.get(&e.origin).is_some_and(|&n| n > 1))
    }

    /// The buffer of the unwrapped run `id` shares (0: none known).
    pub fn origin_of(&self, id: &TensorId) -> u32 {
        self.entries.get(id).map_or(0, |e| e.origin)
    }

    /// `id` shares the buffer `origin` of the unwrapped run.
    fn set_origin(&mut self, id: &TensorId, origin: u32) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let old = std::mem::replace(&mut entry.origin, origin);
        if old == origin {
            return;
        }
        self.leave_origin(old);
        *self.origins.entry(origin).or_default() += 1;
    }

    /// One tensor less shares `origin` (0: none).
    fn leave_origin(&mut self, origin: u32) {
        if origin == 0 {
            return;
        }
        if let Some(n) = self.origins.get_mut(&origin) {
            *n -= 1;
            if *n == 0 {
                self.origins.remove(&origin);
            }
        }
    }

    /// A new shared buffer of `bytes`, with no holder yet, counted from now on.
    fn new_buffer(&mut self, key: usize, bytes: u64) -> u32 {
        self.last_buffer = self.last_buffer.wrapping_add(1).max(1);
        while self.buffers.contains_key(&self.last_buffer) {
            self.last_buffer = self.last_buffer.wrapping_add(1).max(1);
        }
        self.buffers.insert(
            self.last_buffer,
            SharedBuffer {
                key,
                bytes,
                holders: 0,
                origin: 0,
            },
        );
        self.books.resident += bytes;
        self.last_buffer
    }

    /// A resident entry with no shared buffer of its own now holds `buffer`: its own bytes
    /// leave the count.
    fn hold(&mut self, id: &TensorId, buffer: u32) {
        if let Some(entry) = self.entries.get_mut(id) {
            debug_assert_eq!(entry.buffer, 0);
            self.books.resident -= entry.bytes;
            entry.buffer = buffer;
            if let Some(shared) = self.buffers.get_mut(&buffer) {
                shared.holders += 1;
            }
        }
    }

    /// A resident entry gives up the shared buffer it holds (if any) and counts its own
    /// bytes again, before it holds another.
    fn release_view(&mut self, id: &TensorId) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let buffer = std::mem::take(&mut entry.buffer);
        if buffer != 0 {
            self.books.resident += entry.bytes;
            self.release_buffer(buffer);
        }
    }

    /// Whether the tensor must be brought back (fetched, waited for, or recomputed) before
    /// an op can use it.
    pub fn is_absent(&self, id: &TensorId) -> bool {
        self.entries.get(id).is_some_and(|e| !e.state.on_device())
    }

    pub fn is_pinned(&self, id: &TensorId) -> bool {
        self.pinned > 0 && self.pinned_uncounted(id)
    }

    /// [`Residency::is_pinned`] read from the entry alone, without the count (for the
    /// engine's debug checks of the count).
    pub fn pinned_uncounted(&self, id: &TensorId) -> bool {
        self.entries.get(id).is_some_and(|e| e.pins > 0)
    }

    /// Whether a recipe pins any entry.
    #[inline]
    pub fn any_pinned(&self) -> bool {
        self.pinned > 0
    }

    /// One recipe more needs `id` (nothing if it is not in the books).
    pub fn pin(&mut self, id: &TensorId) {
        if let Some(entry) = self.entries.get_mut(id) {
            if entry.pins == 0 {
                self.pinned += 1;
            }
            entry.pins += 1;
        }
    }

    /// One recipe less needs `id`: the recipes that still do (`None` if it is not in the
    /// books).
    pub fn unpin(&mut self, id: &TensorId) -> Option<u32> {
        let entry = self.entries.get_mut(id)?;
        if entry.pins == 1 {
            self.pinned -= 1;
        }
        entry.pins = entry.pins.saturating_sub(1);
        Some(entry.pins)
    }

    /// The books as the entries add them up (for tests: must equal [`Residency::books`]).
    #[cfg(test)]
    fn recount(&self) -> (u64, u64, u64) {
        let (mut resident, mut host, mut offloading) = (self.books.lent, 0, 0);
        let mut holders: HashMap<u32, u32> = HashMap::new();
        for entry in self.entries.values() {
            if entry.buffer != 0 {
                assert!(
                    entry.state.on_device(),
                    "only tensors on the device hold a buffer"
                );
                *holders.entry(entry.buffer).or_default() += 1;
            }
            match &entry.state {
                State::Resident | State::Fetching => resident += entry.own(),
                State::Offloading => {
                    resident += entry.own();
                    offloading += entry.own();
                }
                State::Offloaded(copy) => host += copy.bytes(),
                State::Evicted | State::Lost => {}
            }
        }
        assert_eq!(
            holders.len(),
            self.buffers.len(),
            "a shared buffer without holders"
        );
        for (buffer, shared) in &self.buffers {
            assert_eq!(holders.get(buffer), Some(&shared.holders));
            resident += shared.bytes;
        }
        assert_eq!(
            self.entries.values().filter(|e| e.pins > 0).count(),
            self.pinned,
            "the pinned entries counted"
        );
        (resident, host, offloading)
    }

    /// Whether the tensor is offloaded (its host copy whole).
    #[inline]
    pub(crate) fn offloaded(&self, id: &TensorId) -> bool {
        matches!(self.get(id).map(|e| e.state()), Some(State::Offloaded(_)))
    }
}

#[cfg(test)]
mod tests;
