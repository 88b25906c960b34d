package main

import "testing"

func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		flag  int
		env   string
		avail int
		want  int
	}{
		{0, "", 1, 1},
		{0, "", 2, 1},
		{0, "", 8, 4},
		{0, "", 7, 3},
		{3, "", 8, 3},
		{0, "6", 6, 0}, // the variable decides, as Go reads it
		{2, "6", 6, 2},
	} {
		if got := procsFor(tc.flag, tc.env, tc.avail); got != tc.want {
			t.Errorf("procsFor(%d, %q, %d) = %d, want %d", tc.flag, tc.env, tc.avail, got, tc.want)
		}
	}
}
