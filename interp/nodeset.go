package interp

import "math/bits"

// nodeSet is a set of state nodes of one machine, as a bitset indexed by
// document order. Iterating it visits nodes in document order.
type nodeSet []uint64

func newNodeSet(n int) nodeSet { return make(nodeSet, (n+63)/64) }

func (s nodeSet) has(i int) bool { return s[i>>6]&(1<<(uint(i)&63)) != 0 }
func (s nodeSet) add(i int)      { s[i>>6] |= 1 << (uint(i) & 63) }
func (s nodeSet) del(i int)      { s[i>>6] &^= 1 << (uint(i) & 63) }

func (s nodeSet) clone() nodeSet {
	c := make(nodeSet, len(s))
	copy(c, s)
	return c
}

func (s nodeSet) equal(o nodeSet) bool {
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// intersects reports whether s and o share a node.
func (s nodeSet) intersects(o nodeSet) bool {
	for i := range s {
		if s[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

func (s nodeSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// each calls f for every member in increasing order.
func (s nodeSet) each(f func(i int)) {
	for wi, w := range s {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			f(wi<<6 | b)
			w &= w - 1
		}
	}
}

// eachDesc calls f for every member in decreasing order.
func (s nodeSet) eachDesc(f func(i int)) {
	for wi := len(s) - 1; wi >= 0; wi-- {
		w := s[wi]
		for w != 0 {
			b := 63 - bits.LeadingZeros64(w)
			f(wi<<6 | b)
			w &^= 1 << uint(b)
		}
	}
}
