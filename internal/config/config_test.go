package config

import (
	"reflect"
	"testing"
)

func TestJSKeyOrder(t *testing.T) {
	got := KeyOrder([]string{"b", "10", "a", "2", "01", "-1", "4294967295", "4294967294", "0"})
	want := []string{"0", "2", "10", "4294967294", "b", "a", "01", "-1", "4294967295"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestJSNumber(t *testing.T) {
	for in, want := range map[string]float64{"1000": 1000, "1e3": 1000, " 40 ": 40, "": 0, "0x10": 16, "1.5": 1.5} {
		if got, ok := jsNumber(in); !ok || got != want {
			t.Errorf("jsNumber(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"slow", "1s", "0xzz"} {
		if _, ok := jsNumber(in); ok {
			t.Errorf("jsNumber(%q) is a number", in)
		}
	}
}
