package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"

	"github.com/stategate/stategate/store"
	"github.com/stategate/stategate/store/badger"
)

type stateCmd struct {
	Data    string          `default:".stategate" help:"Folder of the store."`
	Store   string          `placeholder:"URL" env:"STATEGATE_STORE" help:"${storeHelp}"`
	List    stateListCmd    `cmd:"" help:"List the stored instances (reads the store, changes nothing)."`
	Show    stateShowCmd    `cmd:"" help:"Show an instance's stored snapshot and timers (changes nothing)."`
	History stateHistoryCmd `cmd:"" help:"Show an instance's audit trail (changes nothing)."`
	Reset   stateResetCmd   `cmd:"" help:"Reset an instance: it starts afresh when next used; the reset goes in its audit trail."`
	Delete  stateDeleteCmd  `cmd:"" help:"Delete an instance, whatever its status, with its audit trail: its workflow's cap counts it no more."`
	Prune   statePruneCmd   `cmd:"" help:"Delete a workflow's instances that finished (--done) or are idle (--idle DURATION), with their audit trails."`
}

// openStore opens the store for an operator command: read-only unless
// write (nothing on disk changes), and never creating one. A running
// server holding it is reported as such.
func openStore(dir string, write bool) (*badger.Store, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return badger.Open(dir, badger.Options{ReadOnly: !write, MustExist: true, GCInterval: -1, Logger: log})
}

type stateListCmd struct{}

func (c *stateListCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openFor(parent.Data, parent.Store, false)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.List(context.Background())
	if err != nil {
		return err
	}
	keys = slices.DeleteFunc(keys, store.Key.IsMeta)
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Machine != keys[j].Machine {
			return keys[i].Machine < keys[j].Machine
		}
		return keys[i].Handle < keys[j].Handle
	})
	for _, k := range keys {
		rec, v, err := st.Load(context.Background(), k)
		if err != nil {
			return fmt.Errorf("%s %q: %w", k.Machine, k.Handle, err)
		}
		value, status := "(reset)", "starts afresh when next used"
		if !rec.IsReset() {
			var snap struct {
				Status string          `json:"status"`
				Value  json.RawMessage `json:"value"`
			}
			_ = json.Unmarshal(rec.Snapshot, &snap)
			value, status = string(snap.Value), snap.Status
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\tversion %d\t%s\n", k.Machine, k.Handle, value, status, v, rec.Updated.Format("2006-01-02 15:04:05"))
	}
	return nil
}

type stateShowCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
}

func (c *stateShowCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openFor(parent.Data, parent.Store, false)
	if err != nil {
		return err
	}
	defer st.Close()
	rec, v, err := st.Load(context.Background(), store.Key{Machine: c.Machine, Handle: c.Handle})
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Machine, c.Handle, err)
	}
	out := map[string]any{"version": v, "machineVersion": rec.MachineVersion, "updated": rec.Updated, "snapshot": rec.Snapshot, "timers": rec.Timers}
	if rec.IsReset() {
		out["snapshot"] = nil
		out["reset"] = "the instance was reset: it starts afresh when next used"
	}
	// Calls of bound tools that began and never ended: with the server
	// stopped, each is in doubt (with it running, one may be under way;
	// on a shared store, those of servers alive are).
	trail, err := st.Audit(context.Background(), store.Key{Machine: c.Machine, Handle: c.Handle}, 200)
	if err != nil {
		return err
	}
	live := liveRuns(context.Background(), st)
	doubt := slices.DeleteFunc(store.Unsettled(trail), func(e store.AuditEntry) bool { return live[e.Intent.Run] })
	if len(doubt) > 0 {
		list := make([]map[string]any, len(doubt))
		for i, e := range doubt {
			list[i] = map[string]any{"tool": e.Tool, "arguments": e.Intent.Arguments, "event": e.Intent.Event, "time": e.Time, "version": e.Version}
		}
		out["inDoubt"] = list
	}
	return writeJSON(stdout, out)
}

type stateHistoryCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
	Last    int    `short:"n" default:"20" help:"How many entries (0: all kept)."`
}

func (c *stateHistoryCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openFor(parent.Data, parent.Store, false)
	if err != nil {
		return err
	}
	defer st.Close()
	k := store.Key{Machine: c.Machine, Handle: c.Handle}
	if _, _, err := st.Load(context.Background(), k); err != nil {
		return fmt.Errorf("%s %s: %w", c.Machine, c.Handle, err)
	}
	trail, err := st.Audit(context.Background(), k, c.Last)
	if err != nil {
		return err
	}
	for _, e := range trail {
		from, _ := json.Marshal(e.From)
		to, _ := json.Marshal(e.To)
		ev, _ := json.Marshal(e.Event)
		fmt.Fprintf(stdout, "%s\tv%d\t%s\t%s -> %s\t%s\tsession %s", e.Time.Format("2006-01-02 15:04:05.000"), e.Version, e.Tool, from, to, ev, e.Session)
		if p := e.Principal; p != nil {
			fmt.Fprintf(stdout, "\tby %s", printable(p.Sub))
			if p.Auth != "" {
				fmt.Fprintf(stdout, " (%s)", printable(p.Auth))
			}
		}
		if c := e.Confirmed; c != nil {
			fmt.Fprintf(stdout, "\tconfirmed by %s (%s)", printable(c.By.Sub), printable(c.Via))
			if c.Comment != "" {
				fmt.Fprintf(stdout, ": %s", printable(c.Comment))
			}
		}
		if e.Note != "" {
			fmt.Fprintf(stdout, "\t%s", e.Note)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

type stateResetCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
}

func (c *stateResetCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openFor(parent.Data, parent.Store, true)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	k := store.Key{Machine: c.Machine, Handle: c.Handle}
	rec, v, err := st.Load(ctx, k)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Machine, c.Handle, err)
	}
	var from any
	if !rec.IsReset() {
		var snap struct {
			Value any `json:"value"`
		}
		_ = json.Unmarshal(rec.Snapshot, &snap)
		from = snap.Value
	}
	if _, err := store.Reset(ctx, st, k, v, from, rec.Input, "reset by an operator (stategate state reset)"); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s reset: it starts afresh when next used (version %d; the reset is in its history)\n", c.Machine, c.Handle, v+1)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printable renders what a client or a token gave (a subject, a comment)
// for a terminal: control characters escaped, as JSON escapes them.
func printable(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
