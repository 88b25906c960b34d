package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stategate/stategate/store"
)

// Deleting instances: `state delete M HANDLE` (one, whatever its status)
// and `state prune M` (those finished, or idle for long). They go through
// the store as `state reset` does: on Badger while no server holds it; on
// PostgreSQL while servers run, which hear of each deletion through the
// change feed and forget their copy of the instance.

type stateDeleteCmd struct {
	Machine string `arg:""`
	Handle  string `arg:""`
	Force   bool   `help:"Delete it even when a call waits for an operator's approval or a call of a bound tool is in doubt (its audit trail, the only record of that call, goes with it)."`
}

func (c *stateDeleteCmd) Run(parent *stateCmd, stdout io.Writer) error {
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
	reason, busy, err := whyKeep(ctx, st, k, rec)
	switch {
	case err != nil:
		return err
	case busy:
		return fmt.Errorf("%s %s: not deleted: %s; try again once it ends", c.Machine, c.Handle, reason)
	case reason != "" && !c.Force:
		return fmt.Errorf("%s %s: not deleted: %s (--force deletes it anyway)", c.Machine, c.Handle, reason)
	}
	if err := st.Delete(ctx, k); err != nil {
		return fmt.Errorf("%s %s: %w", c.Machine, c.Handle, err)
	}
	if err := st.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s deleted (%s, version %d, last changed %s): its record and audit trail are gone; the handle names a new instance when next used\n",
		c.Machine, c.Handle, statusOf(rec), v, rec.Updated.Format("2006-01-02 15:04:05"))
	return nil
}

type statePruneCmd struct {
	Machine string        `arg:"" help:"The workflow whose instances are deleted."`
	Done    bool          `help:"Delete the instances that finished: status done, error or stopped."`
	Idle    time.Duration `placeholder:"DURATION" help:"Delete the instances whose last change is older than this (720h: 30 days). With --done: the finished ones idle that long."`
	DryRun  bool          `help:"List what would be deleted, and delete nothing."`
}

// Validate refuses a prune that says nothing of what to delete (a usage
// error, exit status 2).
func (c *statePruneCmd) Validate() error {
	if c.Idle < 0 {
		return fmt.Errorf("--idle %v: a duration of at least 0", c.Idle)
	}
	if !c.Done && c.Idle == 0 {
		return errors.New("state prune: say what to delete: --done (the finished instances), --idle DURATION (those unchanged that long), or both")
	}
	return nil
}

func (c *statePruneCmd) Run(parent *stateCmd, stdout io.Writer) error {
	st, err := openFor(parent.Data, parent.Store, !c.DryRun)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	n, err := st.Count(ctx, c.Machine)
	if err != nil {
		return err
	}
	keys, err := st.Recent(ctx, c.Machine, n)
	if err != nil {
		return err
	}
	now := time.Now()
	deleted, skipped := 0, 0
	for i := len(keys) - 1; i >= 0; i-- { // the oldest first
		k := keys[i]
		rec, v, err := st.Load(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", k.Machine, k.Handle, err)
		}
		status := statusOf(rec)
		if c.Done && !finished(status) || c.Idle > 0 && now.Sub(rec.Updated) < c.Idle {
			continue
		}
		line := fmt.Sprintf("%s\t%s\t%s\tversion %d\tlast changed %s", k.Machine, k.Handle, status, v, rec.Updated.Format("2006-01-02 15:04:05"))
		reason, _, err := whyKeep(ctx, st, k, rec)
		if err != nil {
			return err
		}
		if reason != "" {
			fmt.Fprintf(stdout, "%s\tkept: %s\n", line, reason)
			skipped++
			continue
		}
		if c.DryRun {
			fmt.Fprintf(stdout, "%s\twould be deleted\n", line)
			deleted++
			continue
		}
		if err := st.Delete(ctx, k); err != nil {
			return fmt.Errorf("%s %s: %w (%d deleted before it)", k.Machine, k.Handle, err, deleted)
		}
		fmt.Fprintf(stdout, "%s\tdeleted\n", line)
		deleted++
	}
	if err := st.Close(); err != nil {
		return err
	}
	verb := "deleted"
	if c.DryRun {
		verb = "would be deleted (--dry-run: nothing was)"
	}
	fmt.Fprintf(stdout, "%s: %d %s %s", c.Machine, deleted, plural(deleted, "instance"), verb)
	if skipped > 0 {
		fmt.Fprintf(stdout, "; %d kept (a call waits for approval, is in doubt or under way: see state show, state delete --force)", skipped)
	}
	fmt.Fprintln(stdout)
	return nil
}

// whyKeep says why an instance should not be deleted without --force
// (none: ""): a call that waits for an operator's approval, or a call of
// a bound tool that nothing settled (in doubt; its trail is its only
// record). busy is set when that call is under way on a server that runs
// (on a shared store): never deleted then.
func whyKeep(ctx context.Context, st store.Store, k store.Key, rec store.Record) (reason string, busy bool, err error) {
	trail, err := st.Audit(ctx, k, 200)
	if err != nil {
		return "", false, fmt.Errorf("%s %s: %w", k.Machine, k.Handle, err)
	}
	var why []string
	if open := store.Unsettled(trail); len(open) > 0 {
		e := open[len(open)-1]
		if liveRuns(ctx, st)[e.Intent.Run] {
			return fmt.Sprintf("a call of %s is under way on a server that runs (version %d)", e.Tool, e.Version), true, nil
		}
		why = append(why, fmt.Sprintf("a call of %s is in doubt (version %d: it began and nothing settled it; its side effect may have happened)", e.Tool, e.Version))
	}
	if p := rec.Pending; p != nil {
		why = append(why, fmt.Sprintf("a call of %s by %s waits for an operator's approval", p.Tool, printable(p.Principal.Sub)))
	}
	return strings.Join(why, "; "), false, nil
}

// statusOf is a record's status as its snapshot says ("reset" for a
// reset).
func statusOf(rec store.Record) string {
	if rec.IsReset() {
		return "reset"
	}
	var snap struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(rec.Snapshot, &snap)
	return snap.Status
}

// finished reports whether a status is an end: done, error or stopped.
func finished(status string) bool {
	return status == "done" || status == "error" || status == "stopped"
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
