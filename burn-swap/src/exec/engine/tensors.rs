//! The device's tensors as burn-swap holds them: the books ([`Residency`]) and the inner
//! backend's handles, for what needs both and nothing else of the engine ([`Tensors`],
//! [`Engine::tensors`]).
//!
//! Tensors leaving the books. One verb, *remove*: [`Tensors::remove`] takes a tensor out of
//! the books; `remove_with_handle` drops its device handle too, `remove_was_on_device` keeps
//! of the entry only whether the device held it, `remove_unless_pinned` leaves a tensor a
//! recipe still reads as an orphan, `remove_dropped` is Burn's drop. What a removed tensor
//! held (its recipe's pins, its group) is released by `release_holdings`: a recipe's inputs
//! are unpinned (`unpin`), a group lets go of its member (`leave_group`).
//!
//! Where a tensor lives, as the backend tells it (`probe`, `probe_entry`): which buffer, and
//! whether it is dense (`exec::layout`).

use burn_ir::{BackendIr, TensorId, TensorStatus};

use super::Engine;
use crate::exec::interpreter::Handles;
use crate::exec::layout;
use crate::exec::residency::{Entry, Group, LetGo, Recipe, Residency};

/// The device's tensors as burn-swap holds them: the books and the inner backend's handles,
/// all that a tensor leaving the books or a probe of where one lives needs.
pub(super) struct Tensors<'a, B: BackendIr> {
    books: &'a mut Residency,
    handles: &'a mut Handles<B>,
}

impl<B: BackendIr> Engine<B> {
    /// The device's tensors: the books and the handles.
    #[inline]
    pub(super) fn tensors(&mut self) -> Tensors<'_, B> {
        Tensors {
            books: &mut self.residency,
            handles: &mut self.handles,
        }
    }
}

impl<B: BackendIr> Tensors<'_, B> {
    /// Burn is done with a tensor (consumed or dropped it): it leaves the books, unless a
    /// recipe still needs it, in which case it stays as an orphan until the recipe is done.
    #[inline]
    pub(super) fn remove_unless_pinned(&mut self, id: &TensorId) {
        match self.books.remove_unless_pinned(id) {
            LetGo::Removed(gone) => self.release_holdings(*id, gone.recipe, gone.group),
            LetGo::Orphaned(Some(recipe)) => self.release_holdings(*id, Some(recipe), None),
            LetGo::Orphaned(None) | LetGo::Absent => {}
        }
    }

    /// [`Self::remove`], keeping of the entry only whether the device held it (`None`: it
    /// was not in the books).
    #[inline]
    pub(super) fn remove_was_on_device(&mut self, id: &TensorId) -> Option<bool> {
        let gone = self.books.remove_parts(id)?;
        self.release_holdings(*id, gone.recipe, gone.group);
        Some(gone.on_device)
    }

    /// What a tensor taken out of the books held: its recipe's inputs are unpinned, its
    /// group lets go of it.
    #[inline]
    pub(super) fn release_holdings(
        &mut self,
        id: TensorId,
        recipe: Option<Box<Recipe>>,
        group: Option<Box<Group>>,
    ) {
        if let Some(recipe) = recipe {
            for input in recipe.inputs {
                self.unpin(input);
            }
        }
        if group.is_some() {
            self.leave_group(id, group);
        }
    }

    /// Removes a tensor from the books; its recipe, if any, releases the inputs it pinned.
    #[inline]
    pub(super) fn remove(&mut self, id: &TensorId) -> Option<Entry> {
        let mut entry = self.books.remove(id)?;
        self.release_holdings(*id, entry.recipe.take(), entry.take_group());
        Some(entry)
    }

    /// Removes a tensor from the books and from the device.
    pub(super) fn remove_with_handle(&mut self, id: TensorId) {
        if let Some(entry) = self.remove(&id)
            && entry.state().on_device()
        {
            self.handles.remove(&id);
        }
    }

    /// Burn dropped a tensor: it leaves the books and the device, unless a recipe still reads
    /// it (an orphan then).
    pub(super) fn remove_dropped(&mut self, id: TensorId) {
        self.books.pin_for_views(id);
        if self.books.is_pinned(&id) {
            // A recipe still reads it: it stays, as an orphan.
            self.remove_unless_pinned(&id);
            return;
        }
        match self.remove_was_on_device(&id) {
            // Nothing of it is left on the device.
            Some(false) => {}
            _ => {
                self.handles.remove(&id);
            }
        }
    }

    /// One recipe less needs `id`; an orphan nobody needs any more is released.
    pub(super) fn unpin(&mut self, id: TensorId) {
        if self.books.unpin(&id) == Some(0) && self.books.get(&id).is_some_and(|e| e.orphan) {
            // Views that keep their op from it take their recipes now (pinning it again).
            self.books.pin_for_views(id);
            if !self.books.is_pinned(&id) {
                self.remove_with_handle(id);
            }
        }
    }

    /// A holder waiting for its carrier left the books (Burn dropped it): the carrier no
    /// longer brings it back, nor needs to stay for it.
    pub(super) fn leave_group(&mut self, member: TensorId, group: Option<Box<Group>>) {
        let Some(Group::Member { carrier }) = group.map(|g| *g) else {
            return;
        };
        if let Some(Group::Carrier { members, .. }) =
            self.books.get_mut(&carrier).and_then(|e| e.group_mut())
        {
            members.retain(|m| *m != member);
        }
        self.unpin(carrier);
    }

    /// What the backend tells of where a tensor in the books lives, if it can.
    pub(super) fn probe(&self, id: TensorId) -> Option<layout::Probe> {
        self.probe_entry(id, self.books.get(&id)?)
    }

    /// [`Self::probe`] of a tensor whose entry is at hand (not yet in the books).
    pub(super) fn probe_entry(&self, id: TensorId, entry: &Entry) -> Option<layout::Probe> {
        let ir = entry.ir(id, TensorStatus::ReadOnly);
        let handle = self.handles.get(&id)?;
        layout::probe::<B>(handle, &ir.shape, ir.dtype)
    }
}
