package inspect

import "testing"

func TestDuration(t *testing.T) {
	for ms, want := range map[float64]string{
		0:        "0s",
		250:      "250ms",
		1500:     "1.5s",
		5000:     "5s",
		90000:    "1m30s",
		600000:   "10m",
		1800000:  "30m",
		3600000:  "1h",
		5400000:  "1h30m",
		4200000:  "1h10m",
		86400000: "24h",
		3661000:  "1h1m1s",
	} {
		if got := duration(ms); got != want {
			t.Errorf("duration(%v) = %q, want %q", ms, got, want)
		}
	}
}
