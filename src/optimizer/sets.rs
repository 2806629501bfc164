//! Disjoint sets over `0..n` (union-find with path halving): the classes that rules tie together.
//! The root of every set is its smallest member, so sets keyed by root come in order of their
//! smallest member, whatever order they were joined in.

pub(crate) struct DisjointSets {
    parent: Vec<usize>,
}

impl DisjointSets {
    /// `n` sets of one member each.
    pub(crate) fn new(n: usize) -> DisjointSets {
        DisjointSets {
            parent: (0..n).collect(),
        }
    }

    /// The smallest member of the set holding `x`.
    pub(crate) fn root(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    /// Makes one set of those holding `a` and `b`.
    pub(crate) fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        self.parent[a.max(b)] = a.min(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_members_share_the_smallest_as_root_and_the_rest_stay_alone() {
        let mut sets = DisjointSets::new(6);
        sets.join(4, 2);
        sets.join(5, 4);
        sets.join(3, 1);
        let roots: Vec<usize> = (0..6).map(|x| sets.root(x)).collect();
        assert_eq!(roots, vec![0, 1, 2, 1, 2, 2]);
        sets.join(5, 3);
        assert_eq!(
            (0..6).map(|x| sets.root(x)).collect::<Vec<_>>(),
            vec![0, 1, 1, 1, 1, 1]
        );
    }
}
