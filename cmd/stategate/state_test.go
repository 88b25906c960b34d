package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fillStore saves an invoice instance through three states, with audit
// entries, and another instance.
func fillStore(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	var v uint64
	for i, state := range []string{"draft", "review", "approved"} {
		rec := store.Record{Snapshot: []byte(`{"status":"active","value":"` + state + `"}`), MachineVersion: "mv1",
			Audit: &store.AuditEntry{Tool: fmt.Sprint("t", i), From: "x", To: state}}
		var err error
		if v, err = st.Save(ctx, store.Key{Machine: "invoice", Handle: "42"}, rec, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Save(ctx, store.Key{Machine: "invoice", Handle: "7"}, store.Record{Snapshot: []byte(`{"status":"active","value":"draft"}`)}, 0); err != nil {
		t.Fatal(err)
	}
}

// snapshotFolder returns every file of a folder with its content's hash.
func snapshotFolder(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	return out
}

func sameFolder(t *testing.T, before, after map[string]string) {
	t.Helper()
	for name, h := range before {
		if after[name] != h {
			t.Errorf("%s changed", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s appeared", name)
		}
	}
}

// crashCopy copies a store's folder while it is open: what a killed
// server leaves (the files Badger maps into memory are in the cache).
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func runState(parent *stateCmd, cmd interface {
	Run(*stateCmd, io.Writer) error
}) (string, error) {
	var out bytes.Buffer
	err := cmd.Run(parent, &out)
	return out.String(), err
}

// TestStateReadsChangeNothing runs list, show and history on a store
// closed cleanly and on one a killed server left, and finds every file
// of the folder as it was.
func TestStateReadsChangeNothing(t *testing.T) {
	clean := t.TempDir()
	st, err := badger.Open(clean, badger.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, st)
	crashed := crashCopy(t, clean)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"closed": clean, "killed": crashed} {
		t.Run(name, func(t *testing.T) {
			before := snapshotFolder(t, dir)
			p := &stateCmd{Data: dir}
			out, err := runState(p, &stateListCmd{})
			if err != nil || !strings.Contains(out, "invoice\t42\t\"approved\"\tactive\tversion 3") || !strings.Contains(out, "invoice\t7\t") {
				t.Fatalf("list: %v\n%s", err, out)
			}
			out, err = runState(p, &stateShowCmd{Machine: "invoice", Handle: "42"})
			if err != nil || !strings.Contains(out, `"version": 3`) || !strings.Contains(out, `"approved"`) {
				t.Fatalf("show: %v\n%s", err, out)
			}
			out, err = runState(p, &stateHistoryCmd{Machine: "invoice", Handle: "42", Last: 0})
			if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "v3\tt2\t\"x\" -> \"approved\"") {
				t.Fatalf("history: %v\n%s", err, out)
			}
			sameFolder(t, before, snapshotFolder(t, dir))
		})
	}
}

// TestStateWithoutAStore: a folder with no store (missing, or empty) is
// reported, and none is made.
func TestStateWithoutAStore(t *testing.T) {
	empty := t.TempDir()
	missing := filepath.Join(t.TempDir(), "nope")
	for _, dir := range []string{empty, missing} {
		p := &stateCmd{Data: dir}
		for _, cmd := range []interface {
			Run(*stateCmd, io.Writer) error
		}{&stateListCmd{}, &stateShowCmd{Machine: "m", Handle: "h"}, &stateHistoryCmd{Machine: "m", Handle: "h"}, &stateResetCmd{Machine: "m", Handle: "h"}} {
			if _, err := runState(p, cmd); !errors.Is(err, badger.ErrNoStore) {
				t.Errorf("%T on %s: %v, want ErrNoStore", cmd, dir, err)
			}
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("the empty folder now holds %d files", len(entries))
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("%s was made", missing)
	}
}

// TestStateNotFoundAndLocked: show, history and reset of an unknown
// instance say it is not found; every command says when a server holds
// the store.
func TestStateNotFoundAndLocked(t *testing.T) {
	dir := t.TempDir()
	st, err := badger.Open(dir, badger.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, st)
	p := &stateCmd{Data: dir}
	for _, cmd := range []interface {
		Run(*stateCmd, io.Writer) error
	}{&stateListCmd{}, &stateHistoryCmd{Machine: "invoice", Handle: "42"}, &stateResetCmd{Machine: "invoice", Handle: "42"}} {
		if _, err := runState(p, cmd); !errors.Is(err, badger.ErrLocked) || !strings.Contains(err.Error(), "is a server running") {
			t.Errorf("%T while a server holds the store: %v", cmd, err)
		}
	}
	st.Close()
	for _, cmd := range []interface {
		Run(*stateCmd, io.Writer) error
	}{&stateShowCmd{Machine: "invoice", Handle: "9"}, &stateHistoryCmd{Machine: "invoice", Handle: "9"}, &stateResetCmd{Machine: "invoice", Handle: "9"}} {
		if out, err := runState(p, cmd); !errors.Is(err, store.ErrNotFound) || out != "" {
			t.Errorf("%T of an unknown instance: %v %q", cmd, err, out)
		}
	}
}

// TestStateResetIsInTheTrail resets an instance: its trail keeps its
// entries and gains the reset, list and show say it starts afresh.
func TestStateResetIsInTheTrail(t *testing.T) {
	dir := t.TempDir()
	st, err := badger.Open(dir, badger.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, st)
	st.Close()
	p := &stateCmd{Data: dir}
	out, err := runState(p, &stateResetCmd{Machine: "invoice", Handle: "42"})
	if err != nil || !strings.Contains(out, "invoice 42 reset") {
		t.Fatalf("reset: %v %q", err, out)
	}
	out, err = runState(p, &stateHistoryCmd{Machine: "invoice", Handle: "42", Last: 0})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 4 || !strings.Contains(lines[3], "\tv4\t(reset)\t\"approved\" -> null\t") || !strings.Contains(lines[3], "reset by an operator") {
		t.Fatalf("history after the reset: %v\n%s", err, out)
	}
	out, err = runState(p, &stateListCmd{})
	if err != nil || !strings.Contains(out, "invoice\t42\t(reset)\tstarts afresh when next used\tversion 4") {
		t.Fatalf("list after the reset: %v\n%s", err, out)
	}
	out, err = runState(p, &stateShowCmd{Machine: "invoice", Handle: "42"})
	if err != nil || !strings.Contains(out, `"snapshot": null`) || !strings.Contains(out, "starts afresh") {
		t.Fatalf("show after the reset: %v\n%s", err, out)
	}
	// The other instance is untouched.
	out, _ = runState(p, &stateShowCmd{Machine: "invoice", Handle: "7"})
	if !strings.Contains(out, `"draft"`) {
		t.Fatalf("the other instance: %s", out)
	}
}
