//! What `gpuwl serve` keeps between events: [`Mirror`], the exporter's copy of one watched
//! resource, reduced to what the analyses read (a `NodeInfo`, a `PodInfo`, a CR's JSON).
//! What one evaluation over a snapshot of the mirrors computes is gpuwl-core's
//! [`gpuwl_core::analysis::exporter`].

use std::collections::HashMap;

use kube::runtime::watcher::Event;

/// A local copy of one watched resource: objects by key, fed with a watcher's events.
///
/// The objects live in one contiguous `Vec` (in no particular order) so an evaluation reads
/// them as a slice, without a copy; a key → index map finds one. A re-list (`Init` …
/// `InitApply` … `InitDone`) is buffered and swaps in whole at `InitDone`, so objects
/// deleted while the watch was down disappear and an evaluation never sees half a list.
#[derive(Debug)]
pub struct Mirror<T> {
    items: Vec<T>,
    keys: Vec<String>,
    index: HashMap<String, usize>,
    buffer: Option<Box<Mirror<T>>>,
    synced: bool,
}

impl<T> Default for Mirror<T> {
    fn default() -> Self {
        Mirror {
            items: Vec::new(),
            keys: Vec::new(),
            index: HashMap::new(),
            buffer: None,
            synced: false,
        }
    }
}

impl<T> Mirror<T> {
    fn insert(&mut self, key: String, value: T) {
        match self.index.get(&key) {
            Some(&i) => self.items[i] = value,
            None => {
                self.index.insert(key.clone(), self.items.len());
                self.keys.push(key);
                self.items.push(value);
            }
        }
    }

    fn remove(&mut self, key: &str) -> bool {
        let Some(i) = self.index.remove(key) else {
            return false;
        };
        self.items.swap_remove(i);
        self.keys.swap_remove(i);
        if let Some(moved) = self.keys.get(i) {
            self.index.insert(moved.clone(), i);
        }
        true
    }

    /// Applies one watcher event. `Some(value)` keeps the object under its key, `None`
    /// (an object the exporter does not need, e.g. a pod without extended-resource
    /// requests) removes it. Returns whether the mirror's contents may have changed.
    pub fn apply(&mut self, event: Event<(String, Option<T>)>) -> bool {
        match event {
            Event::Init => {
                self.buffer = Some(Box::default());
                false
            }
            Event::InitApply((key, value)) => {
                if let (Some(b), Some(v)) = (self.buffer.as_mut(), value) {
                    b.insert(key, v);
                }
                false
            }
            Event::InitDone => {
                if let Some(b) = self.buffer.take() {
                    self.items = b.items;
                    self.keys = b.keys;
                    self.index = b.index;
                }
                self.synced = true;
                true
            }
            Event::Apply((key, Some(v))) => {
                self.insert(key, v);
                true
            }
            Event::Apply((key, None)) | Event::Delete((key, _)) => self.remove(&key),
        }
    }

    /// Whether the first complete list has arrived.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Forgets everything (the resource's CRD went away), and counts as synced.
    pub fn reset(&mut self) {
        *self = Mirror {
            synced: true,
            ..Mirror::default()
        };
    }

    /// The objects, in no particular order.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// How many objects the mirror holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the mirror holds no object.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_replaces_the_mirror_at_init_done() {
        let sorted = |m: &Mirror<i32>| {
            let mut v = m.as_slice().to_vec();
            v.sort();
            v
        };
        let mut m: Mirror<i32> = Mirror::default();
        assert!(!m.synced());
        m.apply(Event::Init);
        m.apply(Event::InitApply(("a".into(), Some(1))));
        m.apply(Event::InitApply(("b".into(), None)));
        assert!(m.is_empty());
        assert!(m.apply(Event::InitDone));
        assert!(m.synced());
        assert_eq!(m.as_slice(), [1]);
        assert!(m.apply(Event::Apply(("c".into(), Some(3)))));
        assert!(m.apply(Event::Apply(("e".into(), Some(5)))));
        assert!(m.apply(Event::Apply(("c".into(), Some(30)))));
        assert_eq!(sorted(&m), [1, 5, 30]);
        // Removing the first moves the last into its place; the index follows.
        assert!(m.apply(Event::Apply(("a".into(), None))));
        assert!(!m.apply(Event::Delete(("zz".into(), None))));
        assert!(m.apply(Event::Delete(("e".into(), None))));
        assert_eq!(m.as_slice(), [30]);
        assert!(m.apply(Event::Apply(("c".into(), Some(3)))));
        assert_eq!(m.as_slice(), [3]);
        // A re-list after an outage drops what was deleted meanwhile.
        m.apply(Event::Init);
        m.apply(Event::InitApply(("d".into(), Some(4))));
        assert_eq!(m.as_slice(), [3]);
        m.apply(Event::InitDone);
        assert_eq!(m.as_slice(), [4]);
        assert_eq!(m.len(), 1);
        m.reset();
        assert!(m.is_empty() && m.synced());
    }
}
