//! Tensors leaving the books: released by Burn, discarded, forgotten, dropped, and what
//! they held (pins of their recipes, their group) let go.

use burn_ir::{BackendIr, TensorId, TensorStatus};

use super::Engine;
use crate::exec::residency::{Entry, Group, Recipe};

impl<B: BackendIr> Engine<B> {
    /// Burn is done with a tensor (consumed or dropped it): it leaves the books, unless a
    /// recipe still needs it, in which case it stays as an orphan until the recipe is done.
    #[inline]
    pub(super) fn release_by_burn(&mut self, id: &TensorId) {
        if let Some(gone) = self.residency.release(id) {
            self.let_go(*id, gone.recipe, gone.group);
        }
    }

    /// [`Self::forget`], keeping of the entry only whether the device held it (`None`: it
    /// was not in the books).
    #[inline]
    pub(super) fn discard(&mut self, id: &TensorId) -> Option<bool> {
        let gone = self.residency.discard(id)?;
        self.let_go(*id, gone.recipe, gone.group);
        Some(gone.on_device)
    }

    /// What a tensor taken out of the books held: its recipe's inputs are unpinned, its
    /// group lets go of it.
    #[inline]
    pub(super) fn let_go(
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
    pub(super) fn forget(&mut self, id: &TensorId) -> Option<Entry> {
        let mut entry = self.residency.forget(id)?;
        self.let_go(*id, entry.recipe.take(), entry.take_group());
        Some(entry)
    }

    /// Removes a tensor from the books and from the device.
    pub(super) fn release(&mut self, id: TensorId) {
        if let Some(entry) = self.forget(&id)
            && entry.state().on_device()
        {
            self.handles.remove(&id);
        }
    }

    pub(super) fn drop_tensor(&mut self, id: TensorId) {
        self.pin_for_views(id);
        if self.residency.is_pinned(&id) {
            // A recipe still reads it: it stays, as an orphan.
            self.release_by_burn(&id);
            return;
        }
        match self.discard(&id) {
            // Nothing of it is left on the device.
            Some(false) => {}
            _ => {
                self.handles.remove(&id);
            }
        }
    }

    /// Releases what an op that failed (and so never ran) was handed for its last use: Burn
    /// will never name those tensors again.
    pub fn abandon_op(&mut self) {
        for i in 0..self.op.inputs.len() {
            let (id, status) = self.op.inputs[i];
            if status != TensorStatus::ReadWrite {
                continue;
            }
            if self.residency.is_pinned(&id) {
                self.release_by_burn(&id);
            } else {
                self.release(id);
            }
        }
        self.op.inputs.clear();
    }
}
