//! Recipes in the books: a strided view keeps the op that made it, and gets it as its recipe
//! (its inputs pinned) when Burn lets go of what it was made from, so that it can still
//! leave by recomputation.

use burn_ir::{OperationIr, TensorId, TensorIr, TensorStatus};

use super::{Entry, Recipe, Residency};

impl Residency {
    /// `tensor` as the inner backend must be asked for it: Burn's last use of a tensor a
    /// recipe still needs (or will need: the source of a kept view) becomes a read-only one.
    pub(crate) fn read_status(&mut self, tensor: &TensorIr) -> TensorIr {
        if tensor.status == TensorStatus::ReadWrite {
            self.pin_for_views(tensor.id);
        }
        let status = if self.is_pinned(&tensor.id) {
            TensorStatus::ReadOnly
        } else {
            tensor.status
        };
        TensorIr {
            status,
            ..tensor.clone()
        }
    }

    /// A recipe of `op`: every input of it marked read-only (so that the replay leaves them
    /// in place) and pinned until the recipe is used or dropped.
    pub(crate) fn recipe_of(&mut self, mut op: OperationIr, inputs: Vec<TensorId>) -> Box<Recipe> {
        op.mark_read_only(&inputs);
        for input in &inputs {
            self.pin(input);
        }
        Box::new(Recipe { op, inputs })
    }

    /// A strided output keeps the op that made it, to become its recipe later; its sources
    /// remember it, so that it gets that recipe when Burn lets go of them.
    pub(crate) fn keep_view_op(&mut self, view: TensorId, op: Box<OperationIr>) {
        if self.get(&view).is_none() {
            return;
        }
        for t in op.inputs() {
            let views = self.views.sources.entry(t.id).or_default();
            if !views.contains(&view) {
                views.push(view);
            }
        }
        if let Some(entry) = self.get_mut(&view) {
            entry.set_view_op(Some(op));
        }
    }

    /// Whether a strided tensor's kept op can still be replayed: every input is in the books.
    #[inline]
    pub(crate) fn can_rebuild(&self, entry: &Entry) -> bool {
        entry
            .view_op()
            .is_some_and(|op| op.inputs().all(|t| self.get(&t.id).is_some()))
    }

    /// Burn is about to let go of `source`: the strided views still made from it get their
    /// recipes now (pinning it), so that they can still leave by recomputation.
    pub(crate) fn pin_for_views(&mut self, source: TensorId) {
        let Some(views) = self.views.sources.remove(&source) else {
            return;
        };
        for view in views {
            let rebuildable = self
                .get(&view)
                .is_some_and(|e| e.view_op().is_some() && self.can_rebuild(e));
            if rebuildable {
                self.make_view_recipe(view);
            }
        }
    }

    /// Turns a strided tensor's kept op into its recipe: its inputs (all in the books, see
    /// [`Self::can_rebuild`]) are pinned from now on.
    pub(crate) fn make_view_recipe(&mut self, id: TensorId) {
        let Some(entry) = self.get_mut(&id) else {
            return;
        };
        if entry.recipe.is_some() {
            return;
        }
        let Some(op) = entry.take_view_op() else {
            return;
        };
        let mut ids: Vec<TensorId> = Vec::new();
        for t in op.inputs() {
            if !ids.contains(&t.id) {
                ids.push(t.id);
            }
        }
        let recipe = self.recipe_of(*op, ids);
        if let Some(entry) = self.get_mut(&id) {
            entry.recipe = Some(recipe);
        }
    }
}
