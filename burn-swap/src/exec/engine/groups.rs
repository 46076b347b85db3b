//! Shared buffers that leave whole. A buffer several tensors view leaves with all of them;
//! usually each holder leaves its own way (a dense one by offload, a view by replaying the op
//! that made it). When one of them cannot (a strided view whose source is gone, so no op can
//! make it again), the buffer leaves as one copy, carried by one holder's offload, and every
//! other holder waits off the device for it ([`Group`]). When the carrier comes back, every
//! holder is made again as the view it was over the one buffer: they share it as before,
//! counted once, and no kernel ever sees one of them holding it alone (Flex and CubeCL
//! write in place into a buffer only one tensor holds, with other kernels, and other bits).

use burn_ir::{BackendIr, TensorId, TensorStatus};

use super::Engine;
use crate::error::SwapError;
use crate::exec::layout;
use crate::exec::residency::{Group, State};
use crate::plan::reactive::Leave;

impl<B: BackendIr> Engine<B> {
    /// Offloads `buffer` as one copy carried by one of its holders; the others leave the
    /// device with it, their layouts kept. Nothing moves (and `Ok`) when a holder of it is
    /// not resident (one in flight would come back apart), when the backend cannot tell a
    /// holder's layout, or when the holders are not views of the same bytes: the caller
    /// tries other victims. A failed copy leaves every holder resident, intact.
    pub(super) fn offload_whole(&mut self, buffer: u32) -> Result<(), SwapError> {
        let Some(shared) = self.residency.buffer(buffer).copied() else {
            return Ok(());
        };
        let mut holders = self.residency.holders(buffer);
        if holders.len() != shared.holders as usize {
            return Ok(());
        }
        holders.sort_by_key(|id| id.value());
        let _span = tracing::debug_span!(
            "burn_swap::offload_whole",
            buffer,
            bytes = shared.bytes,
            holders = holders.len()
        )
        .entered();
        let mut kept: Vec<layout::Kept> = Vec::with_capacity(holders.len());
        for &id in &holders {
            let layout = self.residency.get(&id).and_then(|entry| {
                let ir = entry.ir(id, TensorStatus::ReadOnly);
                let handle = self.handles.handle(&ir);
                layout::storage::<B>(&handle, &ir.shape, ir.dtype)
            });
            match layout {
                Some((_, _, k)) if kept.first().is_none_or(|first| first.same_storage(&k)) => {
                    kept.push(k)
                }
                // The backend cannot tell a holder's layout, or the holders are not views of
                // the same bytes (CubeCL slices start apart in the memory): the buffer stays.
                _ => {
                    tracing::debug!(
                        tensor = id.value(),
                        buffer,
                        "burn-swap: a shared buffer cannot leave whole"
                    );
                    return Ok(());
                }
            }
        }
        let carrier = holders[0];
        let members = holders[1..].to_vec();
        if let Some(entry) = self.residency.get_mut(&carrier) {
            entry.set_group(Some(Box::new(Group::Carrier {
                members: members.clone(),
                buffer_bytes: shared.bytes,
            })));
        }
        if let Err(error) = self.leave(carrier, Leave::Offload) {
            if let Some(entry) = self.residency.get_mut(&carrier) {
                entry.set_group(None);
                entry.set_kept_layout(None);
            }
            return Err(error);
        }
        // The carrier's copy holds the buffer: the other holders leave the device with it.
        for (member, layout) in members.into_iter().zip(kept.into_iter().skip(1)) {
            let Some(entry) = self.residency.get_mut(&member) else {
                continue;
            };
            entry.set_kept_layout(Some(Box::new(layout)));
            entry.set_group(Some(Box::new(Group::Member { carrier })));
            let ir = entry.ir(member, TensorStatus::ReadWrite);
            self.residency.park(&member);
            self.handles.remove(&ir.id);
            self.residency.pin(&carrier);
        }
        self.history.counters.whole_buffer_offloads += 1;
        Ok(())
    }

    /// After a carrier's fetch landed: every holder still in the books made again as the view
    /// it was over the carrier's buffer, all of them sharing it, counted once.
    pub(super) fn bring_members(&mut self, carrier: TensorId) {
        let Some(entry) = self.residency.get_mut(&carrier) else {
            return;
        };
        if !matches!(entry.state(), State::Resident)
            || !matches!(entry.group(), Some(Group::Carrier { .. }))
        {
            return;
        }
        let Some(Group::Carrier { members, .. }) = entry.take_group().map(|g| *g) else {
            return;
        };
        let (ir, bytes) = (entry.ir(carrier, TensorStatus::ReadOnly), entry.bytes());
        let handle = self.handles.handle(&ir);
        let whole = layout::storage::<B>(&handle, &ir.shape, ir.dtype).map(|(whole, _, _)| whole);
        let probe = self.tensors().probe(carrier);
        // Each holder counts its own bytes until it is seen to share the buffer: not a peak.
        let peak = self.residency.books().peak;
        if let Some(probe) = probe
            && (probe.buffer_bytes != bytes || !members.is_empty())
        {
            self.residency
                .share(&carrier, None, probe.buffer, probe.buffer_bytes);
        }
        let mut remade = 0;
        for member in members {
            let Some(entry) = self.residency.get_mut(&member) else {
                continue;
            };
            if !matches!(entry.group(), Some(Group::Member { .. })) {
                continue;
            }
            let (Some(kept), Some(whole)) = (entry.take_kept_layout(), whole.clone()) else {
                continue;
            };
            entry.set_group(None);
            let out = entry.ir(member, TensorStatus::NotInit);
            let restored = layout::restore::<B>(whole, out.dtype, *kept);
            self.handles.insert(out.id, restored);
            self.residency.rematerialise(&member);
            if let Some(probe) = probe {
                self.residency
                    .share(&member, Some(&carrier), probe.buffer, probe.buffer_bytes);
            }
            remade += 1;
        }
        self.residency.restore_peak(peak);
        for _ in 0..remade {
            self.tensors().unpin(carrier);
        }
    }

    /// Brings back a holder that left with its shared buffer: its carrier is brought back,
    /// and with it every holder.
    pub(super) fn bring_member(
        &mut self,
        member: TensorId,
        carrier: TensorId,
    ) -> Result<(), SwapError> {
        self.bring(carrier)?;
        match self.residency.get(&member) {
            Some(entry) if !entry.state().on_device() => Err(SwapError::TensorLost {
                tensor: member.value(),
                bytes: entry.bytes(),
                reason: "its shared buffer came back without it".into(),
            }),
            _ => Ok(()),
        }
    }
}
