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

// TestLocate checks where Locate places paths in a decoded JSON text:
// keys at their opening quote (the last of a repeated key, whose value
// is kept), array elements at their first character, and a path that
// leaves the config at the deepest key it reached.
func TestLocate(t *testing.T) {
	src := "{\n  \"a\": {\"b\": [\"x\",\n    {\"c\": 1}]},\n  \"d\": 1, \"d\": 2,\n  \"é\": {\"f\": true}\n}"
	v, err := Decode([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	root := v.(*Object)
	for _, tc := range []struct {
		path      []string
		line, col int
	}{
		{nil, 1, 1},
		{[]string{"a"}, 2, 3},
		{[]string{"a", "b"}, 2, 9},
		{[]string{"a", "b", "0"}, 2, 15},
		{[]string{"a", "b", "1"}, 3, 5},
		{[]string{"a", "b", "1", "c"}, 3, 6},
		{[]string{"a", "b", "1", "c", "deeper"}, 3, 6},
		{[]string{"a", "b", "7"}, 2, 9},
		{[]string{"a", "nope"}, 2, 3},
		{[]string{"d"}, 4, 11},
		{[]string{"é", "f"}, 5, 10}, // columns count bytes
	} {
		line, col := Locate(root, tc.path)
		if line != tc.line || col != tc.col {
			t.Errorf("Locate(%q) = %d:%d, want %d:%d", tc.path, line, col, tc.line, tc.col)
		}
	}
}
