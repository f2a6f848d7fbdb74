//! A value the states of a search share until one of them changes it (copy on write), with
//! its fingerprint kept until then: most steps change neither the run's ledger nor the
//! clients' beliefs, so a state's successors share its copy and its fingerprint.

use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

/// A shared value and its fingerprint, taken when first asked for.
pub struct Kept<T> {
    value: Arc<T>,
    fingerprint: Option<u64>,
}

impl<T> Clone for Kept<T> {
    fn clone(&self) -> Self {
        Kept {
            value: Arc::clone(&self.value),
            fingerprint: self.fingerprint,
        }
    }
}

impl<T: Default> Default for Kept<T> {
    fn default() -> Self {
        Kept {
            value: Arc::default(),
            fingerprint: None,
        }
    }
}

impl<T> Deref for Kept<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Clone + Hash> Kept<T> {
    /// The value to change: this state's own copy, made now if another state shares it.
    pub fn get_mut(&mut self) -> &mut T {
        self.fingerprint = None;
        Arc::make_mut(&mut self.value)
    }

    /// The fingerprint of its derived `Hash`.
    pub fn fingerprint(&mut self) -> u64 {
        let value = &self.value;
        let fp = *self
            .fingerprint
            .get_or_insert_with(|| crate::fingerprint::of_hash(&**value));
        debug_assert_eq!(fp, crate::fingerprint::of_hash(&**value), "changed unseen");
        fp
    }
}
