//! The op kinds a recorder has seen, interned: each kind's name once, looked up by its key.

use hashbrown::HashMap;

/// Slots of the direct-mapped cache in front of the kind table.
const KIND_CACHE: usize = 64;

/// Interned kind names, with a small direct-mapped cache in front of the map: a training
/// loop uses a few dozen kinds, so most lookups cost one compare.
pub(super) struct KindTable {
    ids: HashMap<u64, u32>,
    pub(super) names: Vec<String>,
    cache: [(u64, u32); KIND_CACHE],
}

impl Default for KindTable {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            names: Vec::new(),
            cache: [(0, u32::MAX); KIND_CACHE],
        }
    }
}

impl KindTable {
    /// For each kind, whether it moves data rather than computes (`Read`, `Init`, `Drop`):
    /// ops another thread may interleave at places that vary, and autodiff drops in an
    /// order of its own.
    pub(super) fn movable(&self) -> Vec<bool> {
        self.names
            .iter()
            .map(|n| matches!(n.as_str(), "Read" | "Init" | "Drop"))
            .collect()
    }

    #[inline]
    pub(super) fn intern(&mut self, key: u64, name: impl FnOnce() -> String) -> u32 {
        let slot = (key >> 58) as usize % KIND_CACHE;
        let (cached_key, cached_id) = self.cache[slot];
        if cached_key == key && cached_id != u32::MAX {
            return cached_id;
        }
        let id = match self.ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.names.push(name());
                self.ids.insert(key, id);
                id
            }
        };
        self.cache[slot] = (key, id);
        id
    }
}
