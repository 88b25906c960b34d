package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
)

// pruneStore fills a Badger folder with tickets of every kind, each
// last changed at the time given, and returns the folder.
func pruneStore(t *testing.T, now time.Time) string {
	t.Helper()
	dir := t.TempDir()
	st, err := badger.Open(dir, badger.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	old, recent := now.Add(-60*24*time.Hour), now.Add(-time.Hour)
	save := func(machine, handle, status string, at time.Time, pending *store.Pending, audit ...store.AuditEntry) {
		t.Helper()
		k := store.Key{Machine: machine, Handle: handle}
		if len(audit) == 0 {
			audit = []store.AuditEntry{{Tool: "t"}}
		}
		var v uint64
		for _, a := range audit {
			var err error
			if v, err = st.Save(ctx, k, store.Record{Snapshot: []byte(`{"status":"` + status + `","value":"x"}`), Updated: at, Pending: pending, Audit: &a}, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	save("ticket", "done-old", "done", old, nil)
	save("ticket", "done-new", "done", recent, nil)
	save("ticket", "error-old", "error", old, nil)
	save("ticket", "active-old", "active", old, nil)
	save("ticket", "active-new", "active", recent, nil)
	save("ticket", "waiting-old", "active", old, &store.Pending{ID: "p", Tool: "ticket_close", Principal: store.Principal{Sub: "agent"}})
	save("ticket", "doubt-old", "done", old, nil, store.AuditEntry{Tool: "ticket_pay", Intent: &store.Intent{Run: "gone"}})
	save("other", "done-old", "done", old, nil)
	return dir
}

// handles returns the handles of a machine's instances stored in a
// folder.
func handles(t *testing.T, dir, machine string) []string {
	t.Helper()
	st, err := openStore(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	keys, err := st.Recent(ctx, machine, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(keys) - 1; i >= 0; i-- {
		out = append(out, keys[i].Handle)
	}
	return out
}

// TestStatePrune prunes a folder by each rule: what matches goes (one
// line each, and a total), a call waiting or in doubt is kept and said,
// the other workflow is untouched; --dry-run lists the same and deletes
// nothing.
func TestStatePrune(t *testing.T) {
	now := time.Now()
	all := []string{"done-old", "done-new", "error-old", "active-old", "active-new", "waiting-old", "doubt-old"}
	for _, tc := range []struct {
		name    string
		cmd     statePruneCmd
		deleted []string
		kept    []string // and said so
	}{
		{"done", statePruneCmd{Done: true}, []string{"done-old", "done-new", "error-old"}, []string{"doubt-old"}},
		{"idle", statePruneCmd{Idle: 30 * 24 * time.Hour}, []string{"done-old", "error-old", "active-old"}, []string{"waiting-old", "doubt-old"}},
		{"done and idle", statePruneCmd{Done: true, Idle: 30 * 24 * time.Hour}, []string{"done-old", "error-old"}, []string{"doubt-old"}},
	} {
		for _, dry := range []bool{false, true} {
			name := tc.name
			if dry {
				name += ", dry run"
			}
			t.Run(name, func(t *testing.T) {
				dir := pruneStore(t, now)
				cmd := tc.cmd
				cmd.Machine, cmd.DryRun = "ticket", dry
				out, err := runState(&stateCmd{Data: dir}, &cmd)
				if err != nil {
					t.Fatalf("prune: %v\n%s", err, out)
				}
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != len(tc.deleted)+len(tc.kept)+1 {
					t.Fatalf("prune printed %d lines, want %d:\n%s", len(lines), len(tc.deleted)+len(tc.kept)+1, out)
				}
				verb := "\tdeleted"
				if dry {
					verb = "\twould be deleted"
				}
				for _, h := range tc.deleted {
					if !strings.Contains(out, "ticket\t"+h+"\t") || !strings.Contains(lineOf(out, h), verb) {
						t.Errorf("%s is not said %q:\n%s", h, verb, out)
					}
				}
				for _, h := range tc.kept {
					if !strings.Contains(lineOf(out, h), "\tkept: ") {
						t.Errorf("%s is not said kept:\n%s", h, out)
					}
				}
				total := lines[len(lines)-1]
				if !strings.HasPrefix(total, "ticket: "+strconv.Itoa(len(tc.deleted))+" instances") || len(tc.kept) > 0 && !strings.Contains(total, strconv.Itoa(len(tc.kept))+" kept") {
					t.Errorf("the total: %q", total)
				}
				left := all
				if !dry {
					left = nil
					for _, h := range all {
						if !slices.Contains(tc.deleted, h) {
							left = append(left, h)
						}
					}
				}
				if got := handles(t, dir, "ticket"); strings.Join(got, " ") != strings.Join(left, " ") {
					t.Errorf("left %v, want %v", got, left)
				}
				if got := handles(t, dir, "other"); len(got) != 1 {
					t.Errorf("the other workflow: %v", got)
				}
			})
		}
	}
}

func lineOf(out, handle string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "\t"+handle+"\t") {
			return l
		}
	}
	return ""
}

// TestStateDelete deletes one instance, whatever its status: its record,
// trail and place in the index go; one with a call waiting or in doubt
// needs --force; an unknown one is not found; a server holding the
// store is said.
func TestStateDelete(t *testing.T) {
	dir := pruneStore(t, time.Now())
	p := &stateCmd{Data: dir}
	out, err := runState(p, &stateDeleteCmd{Machine: "ticket", Handle: "active-new"})
	if err != nil || !strings.Contains(out, "ticket active-new deleted (active, version 1,") {
		t.Fatalf("delete: %v %q", err, out)
	}
	if _, err := runState(p, &stateShowCmd{Machine: "ticket", Handle: "active-new"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("show after the deletion: %v", err)
	}
	st, err := openStore(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	trail, err := st.Audit(context.Background(), store.Key{Machine: "ticket", Handle: "active-new"}, 0)
	n, _ := st.Count(context.Background(), "ticket")
	st.Close()
	if err != nil || len(trail) != 0 || n != 6 {
		t.Fatalf("after the deletion: trail %v (%v), %d tickets counted, want 6", trail, err, n)
	}
	for _, tc := range []struct{ handle, says string }{
		{"waiting-old", "a call of ticket_close by agent waits for an operator's approval (--force deletes it anyway)"},
		{"doubt-old", "a call of ticket_pay is in doubt (version 1"},
	} {
		if out, err := runState(p, &stateDeleteCmd{Machine: "ticket", Handle: tc.handle}); err == nil || !strings.Contains(err.Error(), tc.says) || out != "" {
			t.Errorf("%s without --force: %v %q", tc.handle, err, out)
		}
		if out, err := runState(p, &stateDeleteCmd{Machine: "ticket", Handle: tc.handle, Force: true}); err != nil || !strings.Contains(out, "deleted") {
			t.Errorf("%s with --force: %v %q", tc.handle, err, out)
		}
	}
	if got := handles(t, dir, "ticket"); strings.Join(got, " ") != "done-old done-new error-old active-old" {
		t.Errorf("left %v", got)
	}
	if out, err := runState(p, &stateDeleteCmd{Machine: "ticket", Handle: "nope"}); !errors.Is(err, store.ErrNotFound) || out != "" {
		t.Errorf("an unknown instance: %v %q", err, out)
	}
	held, err := badger.Open(dir, badger.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, cmd := range []interface {
		Run(*stateCmd, io.Writer) error
	}{&stateDeleteCmd{Machine: "ticket", Handle: "done-old"}, &statePruneCmd{Machine: "ticket", Done: true}} {
		if _, err := runState(p, cmd); !errors.Is(err, badger.ErrLocked) || !strings.Contains(err.Error(), "is a server running") {
			t.Errorf("%T while a server holds the store: %v", cmd, err)
		}
	}
}

// TestStatePruneUsage: a prune that says nothing of what to delete is a
// usage error (exit status 2), and so is a negative --idle.
func TestStatePruneUsage(t *testing.T) {
	for _, args := range [][]string{{"state", "prune", "ticket"}, {"state", "prune", "ticket", "--idle", "-1h"}} {
		stdout, stderr, code := runMain(t, args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "--idle") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
