package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"

	"stategate/store"
)

type stateCmd struct {
	Data    string          `default:".stategate" help:"Folder of the store."`
	List    stateListCmd    `cmd:"" help:"List the stored instances."`
	Show    stateShowCmd    `cmd:"" help:"Show an instance's stored snapshot and timers."`
	History stateHistoryCmd `cmd:"" help:"Show an instance's audit trail."`
	Reset   stateResetCmd   `cmd:"" help:"Delete an instance: it starts afresh when next used."`
}

// openStore opens the store for an operator command; a running server
// holding it is reported as such.
func openStore(dir string) (*store.Badger, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no store at %s: %w", dir, err)
	}
	return store.OpenBadger(dir, store.BadgerOptions{GCInterval: -1, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

type stateListCmd struct{}

func (c *stateListCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openStore(parent.Data)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.List(context.Background())
	if err != nil {
		return err
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Machine != keys[j].Machine {
			return keys[i].Machine < keys[j].Machine
		}
		return keys[i].Handle < keys[j].Handle
	})
	for _, k := range keys {
		rec, v, err := st.Load(context.Background(), k)
		if err != nil {
			return err
		}
		var snap struct {
			Status string          `json:"status"`
			Value  json.RawMessage `json:"value"`
		}
		_ = json.Unmarshal(rec.Snapshot, &snap)
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\tversion %d\t%s\n", k.Machine, k.Handle, snap.Value, snap.Status, v, rec.Updated.Format("2006-01-02 15:04:05"))
	}
	return nil
}

type stateShowCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
}

func (c *stateShowCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openStore(parent.Data)
	if err != nil {
		return err
	}
	defer st.Close()
	rec, v, err := st.Load(context.Background(), store.Key{Machine: c.Machine, Handle: c.Handle})
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Machine, c.Handle, err)
	}
	out := map[string]any{"version": v, "machineVersion": rec.MachineVersion, "updated": rec.Updated, "snapshot": rec.Snapshot, "timers": rec.Timers}
	return writeJSON(stdout, out)
}

type stateHistoryCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
	Last    int    `short:"n" default:"20" help:"How many entries (0: all kept)."`
}

func (c *stateHistoryCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openStore(parent.Data)
	if err != nil {
		return err
	}
	defer st.Close()
	trail, err := st.Audit(context.Background(), store.Key{Machine: c.Machine, Handle: c.Handle}, c.Last)
	if err != nil {
		return err
	}
	for _, e := range trail {
		from, _ := json.Marshal(e.From)
		to, _ := json.Marshal(e.To)
		ev, _ := json.Marshal(e.Event)
		fmt.Fprintf(stdout, "%s\tv%d\t%s\t%s -> %s\t%s\tsession %s\n", e.Time.Format("2006-01-02 15:04:05.000"), e.Version, e.Tool, from, to, ev, e.Session)
	}
	return nil
}

type stateResetCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
}

func (c *stateResetCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openStore(parent.Data)
	if err != nil {
		return err
	}
	defer st.Close()
	k := store.Key{Machine: c.Machine, Handle: c.Handle}
	if _, _, err := st.Load(context.Background(), k); err != nil {
		return fmt.Errorf("%s %s: %w", c.Machine, c.Handle, err)
	}
	if err := st.Delete(context.Background(), k); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s reset: it starts afresh when next used\n", c.Machine, c.Handle)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
