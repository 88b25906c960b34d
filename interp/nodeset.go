package interp

import (
	"math/bits"
	"slices"
)

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

// intersects reports whether s and o share a node.
func (s nodeSet) intersects(o nodeSet) bool {
	for i := range s {
		if s[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

func (s nodeSet) equal(o nodeSet) bool { return slices.Equal(s, o) }

func (s nodeSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// next returns the first member at or after i, or -1.
func (s nodeSet) next(i int) int {
	wi := i >> 6
	if wi >= len(s) {
		return -1
	}
	w := s[wi] & (^uint64(0) << (uint(i) & 63))
	for {
		if w != 0 {
			return wi<<6 | bits.TrailingZeros64(w)
		}
		wi++
		if wi >= len(s) {
			return -1
		}
		w = s[wi]
	}
}

// prev returns the last member at or before i, or -1.
func (s nodeSet) prev(i int) int {
	if i < 0 {
		return -1
	}
	wi := i >> 6
	if wi >= len(s) {
		wi = len(s) - 1
		i = wi<<6 | 63
	}
	w := s[wi] & (^uint64(0) >> (63 - uint(i)&63))
	for {
		if w != 0 {
			return wi<<6 | (63 - bits.LeadingZeros64(w))
		}
		wi--
		if wi < 0 {
			return -1
		}
		w = s[wi]
	}
}
