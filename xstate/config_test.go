package xstate

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // each must appear in the error
	}{
		{"syntax", "{\n  \"id\": \"m\",\n  \"states\": {\n    \"a\": {,}\n  }\n}", []string{"m.json:4:", "invalid JSON"}},
		{"not an object", `[1, 2]`, []string{"m.json:1:", "must be a JSON object"}},
		{"v4 cond", "{\"id\":\"m\",\"initial\":\"a\",\"states\":{\n\"a\":{\"on\":{\"GO\":{\"target\":\"b\",\"cond\":\"ok\"}}},\"b\":{}}}", []string{"m.json:2:31: state a:", `"cond" is not an XState v5 transition key`, "guard"}},
		{"v4 internal and null event", `{"id":"m","initial":"a","states":{"a":{"on":{"":"b","X":{"target":"b","internal":false}}},"b":{}}}`, []string{`null events ("")`, `"internal"`}},
		{"bad type", `{"id":"m","initial":"a","states":{"a":{"type":"weird"}}}`, []string{`state a: unknown state type "weird"`}},
		{"bad target", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":42}}}}`, []string{`state a: on "GO": a transition must be a target string or an object`}},
		{"null transition", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":null}}}}`, []string{`state a: on "GO": a transition cannot be null`}},
		{"null in a transition list", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":[null,"a"]}}}}`, []string{`state a: on "GO": a transition must be a target string or an object`}},
		{"null target", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":{"target":null}}}}}`, []string{`state a: on "GO": target cannot be null`}},
		{"missing target", `{"id":"m","initial":"a","states":{"a":{"on":{"GO":"zz"}},"b":{"on":{"BACK":"yy"}}}}`, []string{`state a: transition on event "GO"`, `state b: transition on event "BACK"`}},
		{"onEntry", `{"id":"m","initial":"a","states":{"a":{"onEntry":"x"}}}`, []string{`"onEntry" is not an XState v5 state key: use ` + "`entry`"}},
		{"history as its parent's initial", `{"id":"m","initial":"a","states":{"a":{"initial":"h","states":{"h":{"type":"history"},"x":{}}}}}`, []string{"state a.h: with nothing recorded, this history state resolves to itself"}},
		{"history targets leading back", `{"id":"m","initial":"a","states":{"a":{"initial":"x","states":{"h1":{"type":"history","target":"h2"},"h2":{"type":"history","target":"h1"},"x":{}}}}}`, []string{"state a.h1: with nothing recorded", "state a.h2: with nothing recorded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseJSON("m.json", []byte(tc.src))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseJSONWarnings(t *testing.T) {
	_, warns, err := ParseJSON("m.json", []byte(`{"id":"m","initial":"a","states":{"a":{"intial":"x","on":{"GO":{"target":"a","gaurd":"g"}}},
		"p":{"type":"parallel","initial":"r1","states":{"r1":{},"r2":{}}},"z":{"onDone":"a"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, w := range warns {
		msgs = append(msgs, w.String())
	}
	got := strings.Join(msgs, "\n")
	for _, w := range []string{`warning: state a: unknown key "intial" is ignored`, `unknown transition key "gaurd"`,
		`state p: initial is ignored: a parallel state has no initial state`, `state z: onDone is ignored`} {
		if !strings.Contains(got, w) {
			t.Errorf("warnings %q lack %q", got, w)
		}
	}
}

func TestMissingDiagnostics(t *testing.T) {
	m, _, err := ParseJSON("m.json", []byte(`{"id":"m","initial":"a","states":{"a":{"entry":"hello","after":{"slow":"b"},"on":{"GO":{"guard":"ok","target":"b"}}},"b":{"invoke":{"src":"fetcher"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range MissingDiagnostics("m.json", m) {
		got = append(got, d.String())
	}
	want := []string{
		`m.json:1:40: warning: state a: action "hello" has no implementation; XState skips it`,
		`m.json:1:65: state a: delay "slow" has no implementation`,
		`m.json:1:89: state a: guard "ok" has no implementation`,
		`m.json:1:133: state b: actor "fetcher" has no implementation`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.json", `{"id":"good","initial":"a","states":{"a":{"on":{"GO":"b"}},"b":{}}}`)
	write("bad.json", `{"id":"bad","initial":"a","states":{"a":{"on":{"GO":"zz"}}}}`)
	write("x.case.json", `{"machine":"good.json"}`)
	write(".hidden.json", `{`)
	write("good.json~", `{`)
	// A project's packages and hidden folders are not searched.
	for _, sub := range []string{"node_modules/lodash", ".git"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(sub, "broken.json"), `{"states": {`)
	}
	rep, err := (&Loader{}).Check([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed() || len(rep.Files) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	out := strings.Join(rep.Lines(), "\n")
	for _, w := range []string{"bad.json: FAILED", "good.json: ok (3 states, 1 events)", `state a: transition on event "GO"`} {
		if !strings.Contains(out, w) {
			t.Errorf("report %q lacks %q", out, w)
		}
	}
}
