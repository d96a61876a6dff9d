//! A radix node's children by token hash. Most nodes sit inside a single prompt's chain and have
//! one child, so that case is stored inline; only a fork pays for a map.

use crate::hasher::IdMap;

#[derive(Default)]
pub(crate) enum Children {
    #[default]
    None,
    One(u64, u32),
    Many(Box<IdMap<u64, u32>>),
}

impl Children {
    pub(crate) fn get(&self, hash: u64) -> Option<u32> {
        match self {
            Children::None => None,
            Children::One(h, id) => (*h == hash).then_some(*id),
            Children::Many(map) => map.get(&hash).copied(),
        }
    }

    pub(crate) fn insert(&mut self, hash: u64, id: u32) {
        match self {
            Children::None => *self = Children::One(hash, id),
            Children::One(h, existing) if *h == hash => *existing = id,
            Children::One(h, existing) => {
                let mut map = IdMap::default();
                map.insert(*h, *existing);
                map.insert(hash, id);
                *self = Children::Many(Box::new(map));
            }
            Children::Many(map) => {
                map.insert(hash, id);
            }
        }
    }

    pub(crate) fn remove(&mut self, hash: u64) {
        match self {
            Children::One(h, _) if *h == hash => *self = Children::None,
            Children::Many(map) => {
                map.remove(&hash);
                if map.len() == 1 {
                    let (&h, &id) = map.iter().next().expect("one entry");
                    *self = Children::One(h, id);
                }
            }
            _ => {}
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Children::None)
    }

    /// Heap bytes beyond the node itself.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Children::Many(map) => {
                std::mem::size_of::<IdMap<u64, u32>>() + map.capacity() * (8 + 4 + 1)
            }
            _ => 0,
        }
    }
}

const NONE: u32 = u32::MAX;

/// The worker slots holding a block: usually one, stored inline; the others (rare) in a boxed
/// slice reallocated on change. No allocation at all in the common case.
pub(crate) struct Holders {
    first: u32,
    rest: Option<Box<[u32]>>,
}

impl Default for Holders {
    fn default() -> Self {
        Self {
            first: NONE,
            rest: None,
        }
    }
}

impl Holders {
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (self.first != NONE)
            .then_some(self.first)
            .into_iter()
            .chain(self.rest.iter().flat_map(|r| r.iter().copied()))
    }

    pub(crate) fn contains(&self, slot: u32) -> bool {
        self.first == slot || self.rest.as_ref().is_some_and(|r| r.contains(&slot))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.first == NONE
    }

    pub(crate) fn add(&mut self, slot: u32) {
        if self.contains(slot) {
            return;
        }
        if self.first == NONE {
            self.first = slot;
            return;
        }
        let mut v = self.rest.take().map(Vec::from).unwrap_or_default();
        v.push(slot);
        self.rest = Some(v.into_boxed_slice());
    }

    pub(crate) fn remove(&mut self, slot: u32) {
        if self.first == slot {
            // Promote one of the others, keeping `first` set while any holder is left.
            let mut v = self.rest.take().map(Vec::from).unwrap_or_default();
            self.first = v.pop().unwrap_or(NONE);
            self.rest = (!v.is_empty()).then(|| v.into_boxed_slice());
        } else if let Some(rest) = self.rest.take() {
            let mut v = Vec::from(rest);
            v.retain(|&s| s != slot);
            self.rest = (!v.is_empty()).then(|| v.into_boxed_slice());
        }
    }

    /// Heap bytes beyond the node itself (the allocator's 32-byte minimum chunk counted).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.rest.as_ref().map_or(0, |r| (r.len() * 4 + 8).max(32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_keep_every_slot_once_whatever_the_removal_order() {
        let mut h = Holders::default();
        assert!(h.is_empty());
        for slot in [3, 1, 3, 2] {
            h.add(slot);
        }
        assert_eq!(h.iter().collect::<Vec<_>>(), vec![3, 1, 2]);
        h.remove(3);
        assert!(h.contains(1) && h.contains(2) && !h.contains(3));
        h.remove(1);
        h.remove(9);
        assert_eq!(h.iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(h.heap_bytes(), 0);
        h.remove(2);
        assert!(h.is_empty());
    }

    #[test]
    fn children_go_inline_for_one_and_back_after_a_fork() {
        let mut c = Children::default();
        c.insert(10, 1);
        assert!(matches!(c, Children::One(10, 1)));
        c.insert(20, 2);
        assert_eq!((c.get(10), c.get(20), c.get(30)), (Some(1), Some(2), None));
        c.remove(10);
        assert!(matches!(c, Children::One(20, 2)));
        c.remove(20);
        assert!(c.is_empty());
    }
}
