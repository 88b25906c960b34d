package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stategate/stategate/store"
)

// How the change feed's connection is kept: a ping when no notification
// came for pingEvery, and reconnections from retryMin to retryMax apart.
const (
	pingEvery = 30 * time.Second
	retryMin  = 100 * time.Millisecond
	retryMax  = 5 * time.Second
)

// Watch calls f with every change committed from now on, by any replica
// (see store.Shared.Watch).
func (s *Store) Watch(f func(store.Change)) (cancel func()) { return s.feed.Watch(f) }

// listen keeps the change feed's connection (LISTEN), handing each
// notification's changes to the watchers, until ctx ends. The first
// connection's outcome goes to ready (Open fails without a feed); after
// that, a lost connection is made again, with backoff, and the watchers
// are told Resync once it listens again.
func (s *Store) listen(ctx context.Context, ready chan<- error) {
	defer s.listening.Done()
	first := true
	wait := retryMin
	for {
		conn, err := pgx.ConnectConfig(ctx, s.listenCfg)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+s.q.channel); err != nil {
				conn.Close(context.Background())
			}
		}
		if err != nil {
			if first {
				ready <- err
				return
			}
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("store: the change feed cannot connect; trying again", "in", wait, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, retryMax)
			continue
		}
		if first {
			first = false
			ready <- nil
		} else {
			s.log.Info("store: the change feed is back; changes made while it was away are unknown (resync)")
			s.feed.Publish(store.Change{Resync: true})
		}
		wait = retryMin
		err = s.receive(ctx, conn)
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("store: the change feed lost its connection; reconnecting", "err", err)
	}
}

// receive hands the notifications of a listening connection to the
// watchers until it fails or ctx ends.
func (s *Store) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, pingEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		cs, err := decodeChanges(n.Payload)
		if err != nil {
			// Another program's on the channel, or a later stategate's:
			// what it says is unknown.
			s.log.Warn("store: a change notification that does not parse (resync)", "err", err)
			s.feed.Publish(store.Change{Resync: true})
			continue
		}
		s.feed.Publish(cs...)
	}
}

// decodeChanges reads a payload of encodeChanges.
func decodeChanges(p string) ([]store.Change, error) {
	lines := strings.Split(p, "\n")
	head := strings.Fields(lines[0])
	if len(head) != 2 || head[0] != "1" {
		return nil, fmt.Errorf("a notification of an unknown form (%.20q)", lines[0])
	}
	run, err := unb64(head[1])
	if err != nil {
		return nil, err
	}
	out := make([]store.Change, 0, len(lines)-1)
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 6 {
			return nil, fmt.Errorf("a change of %d fields", len(f))
		}
		c := store.Change{Run: run}
		if c.Version, err = strconv.ParseUint(f[0], 10, 64); err != nil {
			return nil, err
		}
		if f[1] != "-" {
			us, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, err
			}
			c.NextDue = time.UnixMicro(us)
		}
		if c.Intent.Version, err = strconv.ParseUint(f[2], 10, 64); err != nil {
			return nil, err
		}
		if f[3] != "?" {
			if c.Intent.Run, err = unb64(f[3]); err != nil {
				return nil, err
			}
		}
		if c.Key.Machine, err = unb64(f[4]); err != nil {
			return nil, err
		}
		if c.Key.Handle, err = unb64(f[5]); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// b64 and unb64 write and read bytes in a notification ("-": none).
func b64(s string) string {
	if s == "" {
		return "-"
	}
	return base64.RawStdEncoding.EncodeToString([]byte(s))
}

func unb64(s string) (string, error) {
	if s == "-" {
		return "", nil
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return string(b), err
}
