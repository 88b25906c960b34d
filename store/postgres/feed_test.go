package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/storetest"
)

// TestChangesEncoding: changes go through NOTIFY payloads as they were,
// keys of any bytes, each payload under PostgreSQL's limit of 8,000
// bytes, in order; an intent's run too long to fit is left out.
func TestChangesEncoding(t *testing.T) {
	due := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
	var many []store.Change
	for i, h := range storetest.Awkward {
		for _, m := range []string{"m", "\x00", strings.Repeat("M", 300)} {
			c := store.Change{Key: store.Key{Machine: m, Handle: h}, Version: uint64(i + 1), Run: "r"}
			if i%2 == 0 {
				c.NextDue = due.Add(time.Duration(i) * time.Microsecond)
				c.Intent = store.OpenIntent{Version: uint64(i), Run: "run\x00" + h}
			}
			many = append(many, c)
		}
	}
	long := store.Change{Key: store.Key{Machine: "m", Handle: "h"}, Version: 3, Intent: store.OpenIntent{Version: 2, Run: strings.Repeat("r", 9000)}, Run: "r"}
	for _, c := range []struct {
		name     string
		changes  []store.Change
		payloads int
		want     []store.Change
	}{
		{"none", nil, 0, nil},
		{"one deletion", []store.Change{{Key: store.Key{Machine: "m", Handle: "h"}, Run: "r"}}, 1, nil},
		{"many", many, 2, nil},
		{"a long intent run", []store.Change{long}, 1, []store.Change{{Key: long.Key, Version: 3, Intent: store.OpenIntent{Version: 2}, Run: "r"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			if want == nil {
				want = c.changes
			}
			ps := encodeChanges("r", c.changes)
			if len(ps) != c.payloads {
				t.Fatalf("%d payloads, want %d", len(ps), c.payloads)
			}
			var got []store.Change
			for _, p := range ps {
				if len(p) >= 8000 {
					t.Fatalf("a payload of %d bytes", len(p))
				}
				cs, err := decodeChanges(p)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, cs...)
			}
			if len(got) != len(want) {
				t.Fatalf("%d changes, want %d", len(got), len(want))
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.Key != w.Key || g.Version != w.Version || !g.NextDue.Equal(w.NextDue) || g.Intent != w.Intent || g.Run != w.Run {
					t.Fatalf("change %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
	for _, p := range []string{"", "2 cg", "1 cg\n1 2 3", "1 cg\nx - 0 - bQ aA", "1 !!"} {
		if _, err := decodeChanges(p); err == nil {
			t.Errorf("%q decoded", p)
		}
	}
}
