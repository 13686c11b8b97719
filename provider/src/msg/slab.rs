//! A tiny slab: values addressed by index, freed slots reused (no linked webs).

/// Values stored at stable indices; removed slots are reused by later inserts.
pub(crate) struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Store `v`, returning its index.
    pub(crate) fn insert(&mut self, v: T) -> usize {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            self.items[i] = Some(v);
            i
        } else {
            self.items.push(Some(v));
            self.items.len() - 1
        }
    }

    /// Take the value at `i` out, if present.
    pub(crate) fn remove(&mut self, i: usize) -> Option<T> {
        let v = self.items.get_mut(i)?.take();
        if v.is_some() {
            self.len -= 1;
            self.free.push(i);
        }
        v
    }

    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.items.get_mut(i)?.as_mut()
    }

    /// Number of stored values.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Indices of stored values matching `f` (for rare bulk work such as a peer restart).
    pub(crate) fn indices_where(&self, mut f: impl FnMut(&T) -> bool) -> Vec<usize> {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().filter(|v| f(v)).map(|_| i))
            .collect()
    }
}
