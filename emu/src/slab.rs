//! A tiny generational slab: handles are `generation << 16 | index`, so a destroyed object's
//! handle never finds the object that reuses its slot (until 65536 reuses of that slot).
pub(crate) struct Slab<T> {
    slots: Vec<(u16, Option<T>)>,
    free: Vec<u16>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn insert(&mut self, v: T) -> Option<u32> {
        let idx = match self.free.pop() {
            Some(i) => i as usize,
            None if self.slots.len() < 1 << 16 => {
                self.slots.push((0, None));
                self.slots.len() - 1
            }
            None => return None,
        };
        let s = &mut self.slots[idx];
        s.1 = Some(v);
        self.len += 1;
        Some((s.0 as u32) << 16 | idx as u32)
    }
    fn slot(&self, h: u32) -> Option<&(u16, Option<T>)> {
        let s = self.slots.get((h & 0xFFFF) as usize)?;
        (s.0 as u32 == h >> 16).then_some(s)
    }
    pub fn get(&self, h: u32) -> Option<&T> {
        self.slot(h)?.1.as_ref()
    }
    pub fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        let s = self.slots.get_mut((h & 0xFFFF) as usize)?;
        if s.0 as u32 != h >> 16 {
            return None;
        }
        s.1.as_mut()
    }
    pub fn remove(&mut self, h: u32) -> Option<T> {
        let idx = (h & 0xFFFF) as usize;
        let s = self.slots.get_mut(idx)?;
        if s.0 as u32 != h >> 16 || s.1.is_none() {
            return None;
        }
        let v = s.1.take();
        s.0 = s.0.wrapping_add(1);
        self.free.push(idx as u16);
        self.len -= 1;
        v
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.1.as_ref().map(|v| ((s.0 as u32) << 16 | i as u32, v)))
    }
}
