//! A set of logical CPU numbers, stored as a bitmap so that machines with thousands of CPUs stay cheap.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct CpuSet {
    words: Words,
}

/// The bitmap, never with a trailing zero word (so that equal sets have equal words).
#[derive(Clone)]
enum Words {
    /// CPUs 0 to 63 alone (zero: the empty set), held in place: on a machine of up to 64 CPUs, or low on
    /// a larger one, a set costs no allocation and a copy no shared count.
    One(u64),
    /// Two words or more, shared between copies: a plan holds one partition in many assignments and
    /// slots, and on a machine of 1,024 CPUs a copy that allocated would cost more than the rest of the
    /// work on it.
    Many(Arc<[u64]>),
}

impl Default for Words {
    fn default() -> Self {
        Words::One(0)
    }
}

// Copies of a large set share their words, and comparing a copy with its original is the common case
// (a job on the partition it held): `Arc`'s own comparison reads both slices even then.
impl PartialEq for CpuSet {
    fn eq(&self, other: &Self) -> bool {
        match (&self.words, &other.words) {
            (Words::One(a), Words::One(b)) => a == b,
            (Words::Many(a), Words::Many(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }
}

impl Eq for CpuSet {}

// By the words, as a slice: the order and hash the sets had when all were slices.
impl PartialOrd for CpuSet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CpuSet {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.words().cmp(other.words())
    }
}

impl std::hash::Hash for CpuSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.words().hash(state);
    }
}

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_range(range: std::ops::Range<u32>) -> Self {
        range.collect()
    }

    pub fn insert(&mut self, cpu: u32) {
        let (w, b) = (cpu as usize / 64, cpu % 64);
        match &mut self.words {
            Words::One(word) if w == 0 => {
                *word |= 1 << b;
                return;
            }
            Words::Many(words) => {
                if let Some(word) = Arc::get_mut(words).and_then(|words| words.get_mut(w)) {
                    *word |= 1 << b;
                    return;
                }
            }
            Words::One(_) => {}
        }
        let mut words = self.words().to_vec();
        if words.len() <= w {
            words.resize(w + 1, 0);
        }
        words[w] |= 1 << b;
        *self = CpuSet::of_words(words);
    }

    pub fn remove(&mut self, cpu: u32) {
        if self.contains(cpu) {
            let mut words = self.words().to_vec();
            words[cpu as usize / 64] &= !(1 << (cpu % 64));
            *self = CpuSet::of_words(words);
        }
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = (cpu as usize / 64, cpu % 64);
        self.words().get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    pub fn len(&self) -> usize {
        // Zero words skipped: a set high on a large machine is mostly zeros, and without a popcount
        // instruction in the baseline x86-64 target each count costs a dozen operations.
        self.words()
            .iter()
            .filter(|w| **w != 0)
            .map(|w| w.count_ones() as usize)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        matches!(self.words, Words::One(0))
    }

    pub fn iter(&self) -> Cpus<'_> {
        Cpus {
            words: self.words().iter(),
            base: 0u32.wrapping_sub(64),
            rest: 0,
        }
    }

    /// The bitmap: CPUs 64·i to 64·i + 63 in word i, lowest CPU in the lowest bit.
    pub fn words(&self) -> &[u64] {
        match &self.words {
            Words::One(0) => &[],
            Words::One(word) => std::slice::from_ref(word),
            Words::Many(words) => words,
        }
    }

    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words().len().max(other.words().len());
        CpuSet::of_word_fn(n, |i| self.word(i) | other.word(i))
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let n = self.words().len().min(other.words().len());
        CpuSet::of_word_fn(n, |i| self.word(i) & other.word(i))
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet::of_word_fn(self.words().len(), |i| self.word(i) & !other.word(i))
    }

    /// [`difference`](Self::difference) in place: in the words themselves when no copy shares them
    /// and the highest word keeps a CPU.
    pub fn remove_all(&mut self, other: &CpuSet) {
        if self.is_disjoint(other) {
            return;
        }
        match &mut self.words {
            Words::One(word) => {
                *word &= !other.word(0);
                return;
            }
            Words::Many(words) => {
                if let Some(words) = Arc::get_mut(words) {
                    for (word, removed) in words.iter_mut().zip(other.words()) {
                        *word &= !removed;
                    }
                    if words.last() != Some(&0) {
                        return;
                    }
                }
            }
        }
        *self = self.difference(other);
    }

    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        self.words()
            .iter()
            .zip(other.words())
            .all(|(a, b)| a & b == 0)
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        (0..self.words().len()).all(|i| self.word(i) & !other.word(i) == 0)
    }

    /// The lowest `n` CPUs of the set (all of them if it has fewer).
    pub fn take(&self, n: usize) -> CpuSet {
        if n == 0 {
            return CpuSet::new();
        }
        let mut left = n;
        // The words up to the one holding the n-th CPU, whole, and that one cut after it.
        let words = self.words();
        let end = words.iter().position(|&word| {
            let count = word.count_ones() as usize;
            if count >= left {
                return true;
            }
            left -= count;
            false
        });
        // Fewer than n CPUs: all of them.
        let Some(end) = end else {
            return self.clone();
        };
        CpuSet::of_word_fn(end + 1, |i| {
            if i < end {
                return words[i];
            }
            let mut kept = 0;
            let mut rest = words[i];
            for _ in 0..left {
                let lowest = rest & rest.wrapping_neg();
                kept |= lowest;
                rest ^= lowest;
            }
            kept
        })
    }

    fn word(&self, i: usize) -> u64 {
        self.words().get(i).copied().unwrap_or(0)
    }

    fn of_words(words: Vec<u64>) -> CpuSet {
        CpuSet::of_word_fn(words.len(), |i| words[i])
    }

    /// The set of words `word(0)`, …, `word(n - 1)`, its trailing zero words left out, built in one
    /// allocation, or none for a single word.
    fn of_word_fn(n: usize, word: impl Fn(usize) -> u64) -> CpuSet {
        let len = (0..n).rev().find(|&i| word(i) != 0).map_or(0, |i| i + 1);
        let words = match len {
            0 => Words::One(0),
            1 => Words::One(word(0)),
            _ => Words::Many((0..len).map(word).collect()),
        };
        CpuSet { words }
    }
}

/// The CPUs of a set, lowest first. Its own type rather than a flattened iterator over the words:
/// the model walks the CPUs of every runner on every evaluation, and this walk is a few operations a
/// CPU.
pub struct Cpus<'a> {
    words: std::slice::Iter<'a, u64>,
    /// The first CPU of the word in `rest`.
    base: u32,
    /// The CPUs of the current word not yet given.
    rest: u64,
}

impl Iterator for Cpus<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while self.rest == 0 {
            self.rest = *self.words.next()?;
            self.base = self.base.wrapping_add(64);
        }
        let bit = self.rest.trailing_zeros();
        self.rest &= self.rest - 1;
        Some(self.base + bit)
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut words: Vec<u64> = Vec::new();
        for cpu in iter {
            let (w, b) = (cpu as usize / 64, cpu % 64);
            if words.len() <= w {
                words.resize(w + 1, 0);
            }
            words[w] |= 1 << b;
        }
        CpuSet::of_words(words)
    }
}

/// Formats in the kernel's list format (`0-3,8,10-11`), as used by sysfs, cpusets and `taskset -c`.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut cpus = self.iter().peekable();
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end = cpus.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list {text:?}: {reason} (expected the kernel's list format, e.g. \"0-3,8\")")]
pub struct CpuListError {
    pub text: String,
    pub reason: CpuListProblem,
}

/// What in a CPU list is not the kernel's list format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListProblem {
    #[error("{part:?} is not a CPU number")]
    NotACpu { part: String },
    #[error("range {range} runs backwards")]
    Backwards { range: String },
}

impl FromStr for CpuSet {
    type Err = CpuListError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason: CpuListProblem| CpuListError {
            text: text.to_string(),
            reason,
        };
        let mut set = CpuSet::new();
        for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
            let part = part.trim();
            let parse = |s: &str| {
                s.trim().parse::<u32>().map_err(|_| {
                    error(CpuListProblem::NotACpu {
                        part: s.to_string(),
                    })
                })
            };
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (parse(lo)?, parse(hi)?);
                    if lo > hi {
                        return Err(error(CpuListProblem::Backwards {
                            range: part.to_string(),
                        }));
                    }
                    (lo..=hi).for_each(|cpu| set.insert(cpu));
                }
                None => set.insert(parse(part)?),
            }
        }
        Ok(set)
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_format_round_trips() {
        let set: CpuSet = "0-3,8,10-11,64-65".parse().unwrap();
        assert_eq!(set.len(), 9);
        assert!(set.contains(65) && !set.contains(4));
        assert_eq!(set.to_string(), "0-3,8,10-11,64-65");
        assert_eq!("".parse::<CpuSet>().unwrap(), CpuSet::new());
    }

    #[test]
    fn sets_compare_by_their_cpus_whether_copied_or_built_apart() {
        let set: CpuSet = "960-1023".parse().unwrap();
        assert_eq!(set, set.clone());
        assert_eq!(set, CpuSet::from_range(960..1024));
        assert_ne!(set, CpuSet::from_range(960..1023));
        assert_ne!(set, "0,960-1023".parse().unwrap());
    }

    #[test]
    fn a_set_is_two_words_whatever_it_holds() {
        // The single word beside the shared slice's pointer: plans hold millions of sets.
        assert_eq!(std::mem::size_of::<CpuSet>(), 16);
    }

    #[test]
    fn malformed_lists_are_rejected() {
        assert!("3-1".parse::<CpuSet>().is_err());
        assert!("a".parse::<CpuSet>().is_err());
    }

    #[test]
    fn set_algebra() {
        let a: CpuSet = "0-7".parse().unwrap();
        let b: CpuSet = "4-11".parse().unwrap();
        assert_eq!(a.intersection(&b).to_string(), "4-7");
        assert_eq!(a.union(&b).to_string(), "0-11");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        let mut d: CpuSet = "0-3,64-65".parse().unwrap();
        d.remove_all(&"60-70".parse().unwrap());
        assert_eq!(
            d,
            "0-3".parse().unwrap(),
            "trimmed like difference, so sets compare equal"
        );
        assert!(!a.is_disjoint(&b));
        assert!(a.take(2).is_subset(&a));
        let mut c = a.clone();
        c.remove(7);
        assert_eq!(c.to_string(), "0-6");
    }

    proptest::proptest! {
        /// Every operation gives the set that the same operation on the CPUs as numbers gives, whether
        /// the words are shared with a copy or not, and equal sets compare equal (no trailing zero
        /// word is kept).
        #[test]
        fn operations_agree_with_sets_of_numbers(
            a in proptest::collection::btree_set(0u32..200, 0..40),
            b in proptest::collection::btree_set(0u32..200, 0..40),
            n in 0usize..45,
            shared in proptest::bool::ANY,
        ) {
            use std::collections::BTreeSet;
            let set = |cpus: &BTreeSet<u32>| cpus.iter().copied().collect::<CpuSet>();
            let (x, y) = (set(&a), set(&b));
            proptest::prop_assert_eq!(x.union(&y), set(&a.union(&b).copied().collect()));
            let both = a.intersection(&b).copied().collect();
            proptest::prop_assert_eq!(x.intersection(&y), set(&both));
            let only_a: BTreeSet<u32> = a.difference(&b).copied().collect();
            proptest::prop_assert_eq!(x.difference(&y), set(&only_a));
            let mut removed = x.clone();
            let copy = shared.then(|| removed.clone());
            removed.remove_all(&y);
            proptest::prop_assert_eq!(&removed, &set(&only_a));
            if let Some(copy) = copy {
                proptest::prop_assert_eq!(copy, x.clone());
            }
            proptest::prop_assert_eq!(x.take(n), set(&a.iter().copied().take(n).collect()));
        }
    }

    #[test]
    fn a_changed_copy_leaves_the_original_alone() {
        let original: CpuSet = "0-3".parse().unwrap();
        let mut copy = original.clone();
        copy.insert(2);
        copy.insert(100);
        copy.remove(0);
        copy.remove_all(&"1".parse().unwrap());
        assert_eq!(
            (original.to_string(), copy.to_string()),
            ("0-3".into(), "2-3,100".into())
        );
        let mut emptied = copy.clone();
        for cpu in copy.iter() {
            emptied.remove(cpu);
        }
        assert!(emptied.is_empty());
        assert_eq!(emptied, CpuSet::new());
        assert_eq!(copy.to_string(), "2-3,100");
    }
}
